// `servesweep bench`: the standalone load generator against any OpenAI-compatible URL, the
// drop-in for `vllm bench serve`; --result-json writes vLLM's field names.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "common/api_key.h"
#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"
#include "loadgen/vllm_compat.h"
#include "workload/custom_prompts.h"

namespace servesweep::cli {
namespace {

constexpr size_t kShownFailureReasons = 5;  // on the console; the JSON has every reason

struct BenchOptions {
  loadgen::LoadSettings load;
  std::string api = "completions";
  std::string api_key_env;
  std::string api_key_file;
  std::string result_json;
  loadgen::SloLimits slo;
  std::string arrival = "poisson";
  std::string ramp;
  std::string think_time = "fixed";
  std::string prompts;
  std::string compat;
  uint32_t max_concurrency = 0;  // vLLM's --max-concurrency: the slots, or an open loop's cap
};

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

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Load-test one OpenAI-compatible endpoint");
  cmd->add_option("--url", o->load.base_url, "Base URL, e.g. http://127.0.0.1:8000")->required();
  cmd->add_option("--model", o->load.model, "Model name to request")->required();
  cmd->add_option("--api", o->api, "completions or chat")
      ->check(CLI::IsMember({"completions", "chat"}))
      ->capture_default_str();
  auto* concurrency = cmd->add_option("--concurrency", o->load.concurrency,
                                      "Requests in flight of a closed loop (its slots)");
  auto* max_in_flight =
      cmd->add_option("--max-in-flight", o->load.max_in_flight,
                      "Open loop (--rate, --ramp): at most this many requests in flight; the "
                      "client queues the rest")
          ->check(CLI::PositiveNumber);
  auto* max_concurrency =
      cmd->add_option("--max-concurrency", o->max_concurrency,
                      "As vLLM's: --max-in-flight with --rate or --ramp, else --concurrency")
          ->check(CLI::PositiveNumber)
          ->excludes(concurrency)
          ->excludes(max_in_flight);
  cmd->add_option("--warmup-concurrency", o->load.warmup_concurrency,
                  "Warm-up slots (default --concurrency, else --max-in-flight, else all at once)")
      ->check(CLI::PositiveNumber);
  auto* rate = cmd->add_option("--rate", o->load.request_rate_per_s,
                               "Arrivals per second (open loop; --arrival sets the gaps)");
  concurrency->check(CLI::PositiveNumber);
  rate->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o->load.threads,
                  "Load threads sharing the concurrency (one core parses ~20,000 streams/s)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--burstiness", o->load.burstiness,
                  "Open loop: gamma arrivals of this shape (1 = Poisson, < 1 burstier)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--arrival", o->arrival,
                  "Open-loop gaps: poisson (gamma with --burstiness != 1) or constant (exactly "
                  "1/rate)")
      ->check(CLI::IsMember({"poisson", "constant"}))
      ->capture_default_str();
  auto* ramp = cmd->add_option("--ramp", o->ramp,
                               "Ramp the rate from --ramp-start-rate to --ramp-end-rate: linear "
                               "or exponential (over the measured requests, or --duration-s)")
                   ->check(CLI::IsMember({"linear", "exponential"}));
  cmd->add_option("--ramp-start-rate", o->load.ramp_start_rate_per_s, "Ramp start, requests/s")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--ramp-end-rate", o->load.ramp_end_rate_per_s, "Ramp end, requests/s")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup-s", o->load.warmup_s,
                  "Duration mode: seconds of unmeasured load before the window")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--duration-s", o->load.duration_s,
                  "Duration mode: the measurement window, seconds (replaces --num-requests)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--drain-timeout-s", o->load.drain_timeout_s,
                  "Cancel requests still in flight this long after the last send (0 = wait)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  auto* sessions = cmd->add_option("--sessions", o->load.sessions,
                                   "Multi-turn: conversations, at most --concurrency open")
                       ->check(CLI::PositiveNumber);
  cmd->add_option("--turns", o->load.turns, "Multi-turn: turns per session")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--think-time-s", o->load.think_time_s,
                  "Multi-turn: seconds from a turn's end to the next turn's send")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--think-time", o->think_time, "Multi-turn: fixed or exponential (seeded)")
      ->check(CLI::IsMember({"fixed", "exponential"}))
      ->capture_default_str();
  cmd->add_option("--prompts", o->prompts,
                  "Custom prompts: jsonl:<file>, lines {\"prompt\": ...} or {\"messages\": "
                  "[...]}, optional \"max_tokens\"");
  cmd->add_option("--compat", o->compat,
                  "Also compute every figure as `vllm bench serve` does (vllm); --result-json "
                  "then holds that view")
      ->check(CLI::IsMember({"vllm"}));
  cmd->add_flag("--token-id-prompts", o->load.token_id_prompts,
                "Prompts as token-id arrays (completions API): exact input lengths on any engine");
  cmd->add_flag("--no-connection-reuse{false}", o->load.reuse_connections,
                "A new connection per request (servers that close streamed connections, e.g. "
                "llama-server)");
  cmd->add_option("--ca-file", o->load.ca_file,
                  "HTTPS: verify the server against the CA certificate(s) in this PEM file "
                  "instead of the system's CA store")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--insecure-tls", o->load.insecure_tls,
                "HTTPS: do not verify the server's certificate (test servers only)");
  cmd->add_option("--num-requests", o->load.num_requests, "Measured requests")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup-requests", o->load.warmup_requests, "Unmeasured requests sent first")
      ->capture_default_str();
  cmd->add_option("--input-len", o->load.input_len_tok, "Prompt length, tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", o->load.output_len_tok, "Output length, tokens (ignore_eos)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->load.seed, "Seed for prompts and arrivals")->capture_default_str();
  cmd->add_option("--timeout-s", o->load.request_timeout_s, "Per-request timeout")
      ->capture_default_str();
  cmd->add_option("--api-key-env", o->api_key_env, "Environment variable holding the API key");
  cmd->add_option("--api-key-file", o->api_key_file,
                  "File holding the API key (first line), when no --api-key-env");
  cmd->add_option("--slo-ttft-ms", o->slo.ttft_ms, "Goodput limit on TTFT");
  cmd->add_option("--slo-tpot-ms", o->slo.tpot_ms, "Goodput limit on TPOT");
  cmd->add_option("--slo-e2el-ms", o->slo.e2el_ms, "Goodput limit on E2E latency");
  cmd->add_option("--result-json", o->result_json, "Write vLLM-compatible result JSON here");
  cmd->callback([o, exit_code, rate, concurrency, max_concurrency, ramp, sessions] {
    const bool open_loop = rate->count() > 0 || ramp->count() > 0;
    if (max_concurrency->count() > 0) {
      (open_loop ? o->load.max_in_flight : o->load.concurrency) = o->max_concurrency;
    }
    const bool slots = concurrency->count() > 0 || (!open_loop && max_concurrency->count() > 0);
    if (!open_loop && !slots && sessions->count() == 0) {
      spdlog::error(
          "bench: expected --concurrency C (closed loop), --rate R or --ramp (open loop), or "
          "--sessions, found none");
      *exit_code = kExitError;
      return;
    }
    if (open_loop && !slots) o->load.concurrency = 0;
    if (sessions->count() > 0 && !slots) o->load.concurrency = 0;
    o->load.arrival =
        o->arrival == "constant" ? loadgen::ArrivalKind::kConstant : loadgen::ArrivalKind::kPoisson;
    o->load.ramp = o->ramp == "linear"        ? loadgen::RampKind::kLinear
                   : o->ramp == "exponential" ? loadgen::RampKind::kExponential
                                              : loadgen::RampKind::kNone;
    o->load.think_time_exponential = o->think_time == "exponential";
    o->load.vllm_view = o->compat == "vllm";
    if (!o->prompts.empty()) {
      std::string path;
      if (!workload::ParsePromptsSpec(o->prompts, &path)) {
        spdlog::error("bench: expected --prompts jsonl:<file>, found '{}'", o->prompts);
        *exit_code = kExitError;
        return;
      }
      std::vector<workload::CustomPromptLine> lines;
      if (Status s = workload::ReadCustomPrompts(path, &lines); !s.ok()) {
        spdlog::error("bench: {}", s.message());
        *exit_code = kExitError;
        return;
      }
      for (auto& line : lines) {
        o->load.custom_prompts.push_back({line.prompt, line.messages_json, line.max_tokens});
      }
    }
    o->load.api = o->api == "chat" ? loadgen::Api::kChatCompletions : loadgen::Api::kCompletions;
    if (Status s = ReadApiKey(o->api_key_env, "--api-key-env", o->api_key_file, "--api-key-file",
                              &o->load.api_key);
        !s.ok()) {
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
      nlohmann::json json = loadgen::ToVllmJson(vllm ? *vllm : summary);
      if (vllm) {
        json["servesweep_view"] = loadgen::ToVllmJson(summary);
        AddServesweepKeys(summary, result, json["servesweep_view"]);
        json["compat"] = "vllm";
      } else {
        AddServesweepKeys(summary, result, json);
      }
      json["model_id"] = o->load.model;
      // vLLM's max_concurrency: the closed loop's slots, or an open loop's cap.
      const uint32_t in_flight_limit =
          o->load.max_in_flight > 0 ? o->load.max_in_flight : o->load.concurrency;
      json["max_concurrency"] =
          in_flight_limit > 0 ? nlohmann::json(in_flight_limit) : nlohmann::json(nullptr);
      json["burstiness"] = o->load.burstiness;
      json["request_rate"] = o->load.request_rate_per_s > 0
                                 ? nlohmann::json(o->load.request_rate_per_s)
                                 : nlohmann::json("inf");
      if (o->load.ramp != loadgen::RampKind::kNone) {
        // vLLM's keys for a ramp (its rate then steps per request; ours follows r(t)).
        json["request_rate"] = nullptr;
        json["ramp_up_strategy"] = o->ramp;
        json["ramp_up_start_rps"] = o->load.ramp_start_rate_per_s;
        json["ramp_up_end_rps"] = o->load.ramp_end_rate_per_s;
      }
      std::ofstream out(o->result_json);
      out << json.dump(2) << "\n";
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
