// `servesweep bench`: the standalone load generator against any OpenAI-compatible URL, the
// drop-in for `vllm bench serve`; --result-json writes vLLM's field names.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "agent/loadgen/bench_metrics.h"
#include "agent/loadgen/load_generator.h"
#include "cli/commands.h"
#include "common/api_key.h"

namespace servesweep::cli {
namespace {

struct BenchOptions {
  loadgen::LoadSettings load;
  std::string api = "completions";
  std::string api_key_env;
  std::string api_key_file;
  std::string result_json;
  loadgen::SloLimits slo;
};

void PrintStats(const char* name, const loadgen::Stats& s) {
  fmt::print("{:<34}{:>12.2f}\n", fmt::format("Mean {} (ms):", name), s.mean);
  fmt::print("{:<34}{:>12.2f}\n", fmt::format("Median {} (ms):", name), s.median);
  fmt::print("{:<34}{:>12.2f}\n", fmt::format("P99 {} (ms):", name), s.p99);
}

void PrintSummary(const loadgen::BenchSummary& s) {
  fmt::print("{:=^46}\n", " Serving Benchmark Result ");
  fmt::print("{:<34}{:>12}\n", "Successful requests:", s.completed);
  fmt::print("{:<34}{:>12}\n", "Failed requests:", s.failed);
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
  fmt::print("{:=^46}\n", "");
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
                                      "Requests in flight (closed loop), or the cap with --rate");
  auto* rate = cmd->add_option("--rate", o->load.request_rate_per_s,
                               "Poisson arrivals per second (open loop)");
  concurrency->check(CLI::PositiveNumber);
  rate->check(CLI::PositiveNumber);
  cmd->add_option("--burstiness", o->load.burstiness,
                  "Open loop: gamma arrivals of this shape (1 = Poisson, < 1 burstier)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
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
  cmd->callback([o, exit_code, rate, concurrency] {
    if (rate->count() == 0 && concurrency->count() == 0) {
      spdlog::error(
          "bench: expected --concurrency C (closed loop) or --rate R (open loop), found neither");
      *exit_code = kExitError;
      return;
    }
    if (rate->count() > 0 && concurrency->count() == 0) o->load.concurrency = 0;
    o->load.api = o->api == "chat" ? loadgen::Api::kChatCompletions : loadgen::Api::kCompletions;
    if (Status s = ReadApiKey(o->api_key_env, "--api-key-env", o->api_key_file, "--api-key-file",
                              &o->load.api_key);
        !s.ok()) {
      spdlog::error("bench: {}", s.message());
      *exit_code = kExitError;
      return;
    }
    loadgen::LoadResult result;
    try {
      result = loadgen::RunLoad(o->load);
    } catch (const std::invalid_argument& e) {
      spdlog::error("bench: {}", e.what());
      *exit_code = kExitError;
      return;
    }
    const loadgen::BenchSummary summary = loadgen::Summarize(result, o->slo);
    PrintSummary(summary);
    if (!o->result_json.empty()) {
      nlohmann::json json = loadgen::ToVllmJson(summary);
      json["model_id"] = o->load.model;
      json["max_concurrency"] =
          o->load.concurrency > 0 ? nlohmann::json(o->load.concurrency) : nlohmann::json(nullptr);
      json["burstiness"] = o->load.burstiness;
      json["request_rate"] = o->load.request_rate_per_s > 0
                                 ? nlohmann::json(o->load.request_rate_per_s)
                                 : nlohmann::json("inf");
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
