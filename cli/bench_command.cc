// `servesweep bench`: the standalone load generator against any OpenAI-compatible URL, the
// drop-in for `vllm bench serve`; --result-json writes vLLM's field names.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>

#include "cli/bench_options.h"
#include "cli/commands.h"
#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"
#include "loadgen/vllm_compat.h"

namespace servesweep::cli {
namespace {

constexpr size_t kShownFailureReasons = 5;  // on the console; the JSON has every reason

void PrintStats(const char* name, const loadgen::Stats& s) {
  fmt::print("{:<34}{:>12.2f}\n", fmt::format("Mean {} (ms):", name), s.mean);
  fmt::print("{:<34}{:>12.2f}\n", fmt::format("Median {} (ms):", name), s.median);
  fmt::print("{:<34}{:>12.2f}\n", fmt::format("P99 {} (ms):", name), s.p99);
}

// Why requests failed, most frequent first: what a user needs to fix first.
void PrintFailureReasons(const loadgen::BenchSummary& s) {
  if (s.failure_reasons.empty()) return;
  fmt::print("Failure reasons ({} failed):\n", s.failed);
  for (size_t i = 0; i < s.failure_reasons.size() && i < kShownFailureReasons; ++i) {
    fmt::print("  {} x {}\n", s.failure_reasons[i].second, s.failure_reasons[i].first);
  }
  if (s.failure_reasons.size() > kShownFailureReasons) {
    fmt::print("  ... and {} other reason(s) (--result-json has them all)\n",
               s.failure_reasons.size() - kShownFailureReasons);
  }
}

void PrintSummary(const loadgen::BenchSummary& s, const char* title, bool ours,
                  uint32_t threads = 1) {
  fmt::print("{:=^46}\n", title);
  fmt::print("{:<34}{:>12}\n", "Successful requests:", s.completed);
  fmt::print("{:<34}{:>12}\n", "Failed requests:", s.failed);
  if (ours) fmt::print("{:<34}{:>12}\n", "  of which cancelled (drain):", s.cancelled);
  fmt::print("{:<34}{:>12.2f}\n", "Benchmark duration (s):", s.duration_s);
  fmt::print("{:<34}{:>12}\n", "Total input tokens:", s.total_input_tokens);
  fmt::print("{:<34}{:>12}\n", "Total generated tokens:", s.total_output_tokens);
  fmt::print("{:<34}{:>12.2f}\n", "Request throughput (req/s):", s.request_throughput);
  if (!std::isnan(s.goodput))
    fmt::print("{:<34}{:>12.2f}\n", "Request goodput (req/s):", s.goodput);
  fmt::print("{:<34}{:>12.2f}\n", "Output token throughput (tok/s):", s.output_throughput);
  fmt::print("{:<34}{:>12.2f}\n", "Total token throughput (tok/s):", s.total_token_throughput);
  PrintStats("TTFT", s.ttft_ms);
  PrintStats("TPOT", s.tpot_ms);
  PrintStats("ITL", s.itl_ms);
  PrintStats("E2EL", s.e2el_ms);
  if (ours) {
    PrintStats("TTFB", s.ttfb_ms);
    PrintStats("client queue", s.client_queue_ms);
    PrintStats("client send", s.client_send_ms);
    fmt::print("{:<34}{:>12.2f}\n", "Window (s):", s.window_s);
    fmt::print("{:<34}{:>12.2f}\n", "Window output tok/s:", s.window_output_throughput);
    fmt::print("{:<34}{:>12.2f}\n", "Window total tok/s:", s.window_total_token_throughput);
    if (s.reconnects > 0) {
      fmt::print("{:<34}{:>12}\n", "Resent on a new connection:", s.reconnects);
    }
    fmt::print("{:<34}{:>11.0f}%\n", "Busiest load thread (CPU):", 100 * s.load_thread_busy_max);
    fmt::print("{:<34}{:>12.3f}\n", "P99 read lag (ms):", s.read_lag_p99_ms);
    fmt::print("{:<34}{:>12.3f}\n", "P99 send lateness (ms):", s.send_lateness_p99_ms);
  }
  fmt::print("{:=^46}\n", "");
  PrintFailureReasons(s);
  if (ours) {
    const std::string client_bound =
        loadgen::ClientBoundReasons(loadgen::ClientLoadFiguresOf(s, threads));
    if (!client_bound.empty()) fmt::print("CLIENT-BOUND: {}\n", client_bound);
  }
}

// Our own figures beyond vLLM's keys (docs/metrics.md).
void AddServesweepKeys(const loadgen::BenchSummary& s, const loadgen::LoadResult& r,
                       nlohmann::json& j) {
  auto num = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
  j["cancelled"] = s.cancelled;
  j["reconnects"] = s.reconnects;
  j["arrival"] = r.arrival;
  // vLLM's `errors` (with --save-detailed): one entry per measured request, "" for a success.
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& request : r.requests) {
    if (!request.warmup) errors.push_back(request.success ? "" : request.error);
  }
  j["errors"] = std::move(errors);
  nlohmann::json reasons = nlohmann::json::object();
  for (const auto& [reason, count] : s.failure_reasons) reasons[reason] = count;
  j["failure_reasons"] = std::move(reasons);
  j["window_s"] = num(s.window_s);
  j["window_output_throughput"] = num(s.window_output_throughput);
  j["window_total_token_throughput"] = num(s.window_total_token_throughput);
  const std::pair<const char*, const loadgen::Stats*> stats[] = {
      {"ttfb", &s.ttfb_ms},
      {"client_queue", &s.client_queue_ms},
      {"client_send", &s.client_send_ms}};
  for (const auto& [name, st] : stats) {
    const std::string n(name);
    j["mean_" + n + "_ms"] = num(st->mean);
    j["median_" + n + "_ms"] = num(st->median);
    j["p99_" + n + "_ms"] = num(st->p99);
  }
}

// --result-json: vLLM's keys (of the vLLM view with --compat vllm, ours beside it), its run
// settings, and our figures beyond them.
nlohmann::json ResultJson(const BenchOptions& options, const loadgen::LoadResult& result,
                          const loadgen::BenchSummary& summary,
                          const std::optional<loadgen::BenchSummary>& vllm) {
  nlohmann::json json = loadgen::ToVllmJson(vllm ? *vllm : summary);
  if (vllm) {
    json["servesweep_view"] = loadgen::ToVllmJson(summary);
    AddServesweepKeys(summary, result, json["servesweep_view"]);
    json["compat"] = "vllm";
  } else {
    AddServesweepKeys(summary, result, json);
  }
  json["model_id"] = options.load.model;
  // vLLM's max_concurrency: the closed loop's slots, or an open loop's cap.
  const uint32_t in_flight_limit =
      options.load.max_in_flight > 0 ? options.load.max_in_flight : options.load.concurrency;
  json["max_concurrency"] =
      in_flight_limit > 0 ? nlohmann::json(in_flight_limit) : nlohmann::json(nullptr);
  json["burstiness"] = options.load.burstiness;
  json["request_rate"] = options.load.request_rate_per_s > 0
                             ? nlohmann::json(options.load.request_rate_per_s)
                             : nlohmann::json("inf");
  if (options.load.ramp != loadgen::RampKind::kNone) {
    // vLLM's keys for a ramp (its rate then steps per request; ours follows r(t)).
    json["request_rate"] = nullptr;
    json["ramp_up_strategy"] = options.ramp;
    json["ramp_up_start_rps"] = options.load.ramp_start_rate_per_s;
    json["ramp_up_end_rps"] = options.load.ramp_end_rate_per_s;
  }
  return json;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Load-test one OpenAI-compatible endpoint");
  AddBenchFlags(*cmd, o.get());
  cmd->callback([o, exit_code] {
    if (Status s = ResolveBenchLoad(o.get()); !s.ok()) {
      spdlog::error("bench: {}", s.message());
      *exit_code = kExitError;
      return;
    }
    loadgen::LoadResult result;
    if (Status s = loadgen::RunLoad(o->load, &result); !s.ok()) {
      spdlog::error("bench: {}", s.message());
      *exit_code = kExitError;
      return;
    }
    const loadgen::BenchSummary summary = loadgen::Summarize(result, o->slo);
    PrintSummary(summary, " Serving Benchmark Result ", true, o->load.threads);
    std::optional<loadgen::BenchSummary> vllm;
    if (o->load.vllm_view) {
      vllm = loadgen::SummarizeVllm(result, o->slo);
      PrintSummary(*vllm, " As vllm bench serve computes it ", false);
    }
    if (!o->result_json.empty()) {
      std::ofstream out(o->result_json);
      out << ResultJson(*o, result, summary, vllm).dump(2) << "\n";
      if (!out) {
        spdlog::error("bench: cannot write {}", o->result_json);
        *exit_code = kExitError;
        return;
      }
    }
    *exit_code = summary.completed > 0 ? kExitOk : kExitError;
  });
}

}  // namespace servesweep::cli
