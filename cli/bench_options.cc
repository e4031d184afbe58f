#include "cli/bench_options.h"

#include <fmt/format.h>

#include "common/api_key.h"
#include "workload/custom_prompts.h"

namespace servesweep::cli {

void AddBenchFlags(CLI::App& cmd, BenchOptions* o) {
  cmd.add_option("--url", o->load.base_url, "Base URL, e.g. http://127.0.0.1:8000")->required();
  cmd.add_option("--model", o->load.model, "Model name to request")->required();
  cmd.add_option("--api", o->api, "completions or chat")
      ->check(CLI::IsMember({"completions", "chat"}))
      ->capture_default_str();
  o->concurrency_flag = cmd.add_option("--concurrency", o->load.concurrency,
                                       "Requests in flight of a closed loop (its slots)");
  CLI::Option* max_in_flight =
      cmd.add_option("--max-in-flight", o->load.max_in_flight,
                     "Open loop (--rate, --ramp): at most this many requests in flight; the "
                     "client queues the rest")
          ->check(CLI::PositiveNumber);
  o->max_concurrency_flag =
      cmd.add_option("--max-concurrency", o->max_concurrency,
                     "As vLLM's: --max-in-flight with --rate or --ramp, else --concurrency")
          ->check(CLI::PositiveNumber)
          ->excludes(o->concurrency_flag)
          ->excludes(max_in_flight);
  cmd.add_option("--warmup-concurrency", o->load.warmup_concurrency,
                 "Warm-up slots (default --concurrency, else --max-in-flight, else all at once)")
      ->check(CLI::PositiveNumber);
  o->rate_flag = cmd.add_option("--rate", o->load.request_rate_per_s,
                                "Arrivals per second (open loop; --arrival sets the gaps)");
  o->concurrency_flag->check(CLI::PositiveNumber);
  o->rate_flag->check(CLI::PositiveNumber);
  cmd.add_option("--threads", o->load.threads,
                 "Load threads sharing the concurrency (one core parses ~30,000 streams/s)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_flag("--pin-threads", o->load.pin_threads,
               "Each load thread on its own core of the allowed set (steadier beside a server)");
  cmd.add_option("--burstiness", o->load.burstiness,
                 "Open loop: gamma arrivals of this shape (1 = Poisson, < 1 burstier)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--arrival", o->arrival,
                 "Open-loop gaps: poisson (gamma with --burstiness != 1) or constant (exactly "
                 "1/rate)")
      ->check(CLI::IsMember({"poisson", "constant"}))
      ->capture_default_str();
  o->ramp_flag = cmd.add_option("--ramp", o->ramp,
                                "Ramp the rate from --ramp-start-rate to --ramp-end-rate: linear "
                                "or exponential (over the measured requests, or --duration-s)")
                     ->check(CLI::IsMember({"linear", "exponential"}));
  cmd.add_option("--ramp-start-rate", o->load.ramp_start_rate_per_s, "Ramp start, requests/s")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--ramp-end-rate", o->load.ramp_end_rate_per_s, "Ramp end, requests/s")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--warmup-s", o->load.warmup_s,
                 "Duration mode: seconds of unmeasured load before the window")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--duration-s", o->load.duration_s,
                 "Duration mode: the measurement window, seconds (replaces --num-requests)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--drain-timeout-s", o->load.drain_timeout_s,
                 "Cancel requests still in flight this long after the last send (0 = wait)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  o->sessions_flag = cmd.add_option("--sessions", o->load.sessions,
                                    "Multi-turn: conversations, at most --concurrency open")
                         ->check(CLI::PositiveNumber);
  cmd.add_option("--turns", o->load.turns, "Multi-turn: turns per session")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--think-time-s", o->load.think_time_s,
                 "Multi-turn: seconds from a turn's end to the next turn's send")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--think-time", o->think_time, "Multi-turn: fixed or exponential (seeded)")
      ->check(CLI::IsMember({"fixed", "exponential"}))
      ->capture_default_str();
  cmd.add_option("--prompts", o->prompts,
                 "Custom prompts: jsonl:<file>, lines {\"prompt\": ...} or {\"messages\": "
                 "[...]}, optional \"max_tokens\"");
  cmd.add_option("--compat", o->compat,
                 "Also compute every figure as `vllm bench serve` does (vllm); --result-json "
                 "then holds that view")
      ->check(CLI::IsMember({"vllm"}));
  cmd.add_flag("--token-id-prompts", o->load.token_id_prompts,
               "Prompts as token-id arrays (completions API): exact input lengths on any engine");
  cmd.add_flag("--no-connection-reuse{false}", o->load.reuse_connections,
               "A new connection per request (servers that close streamed connections, e.g. "
               "llama-server)");
  cmd.add_option("--ca-file", o->load.ca_file,
                 "HTTPS: verify the server against the CA certificate(s) in this PEM file "
                 "instead of the system's CA store")
      ->check(CLI::ExistingFile);
  cmd.add_flag("--insecure-tls", o->load.insecure_tls,
               "HTTPS: do not verify the server's certificate (test servers only)");
  cmd.add_option("--num-requests", o->load.num_requests, "Measured requests")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--warmup-requests", o->load.warmup_requests, "Unmeasured requests sent first")
      ->capture_default_str();
  cmd.add_option("--input-len", o->load.input_len_tok, "Prompt length, tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--output-len", o->load.output_len_tok, "Output length, tokens (ignore_eos)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--seed", o->load.seed, "Seed for prompts and arrivals")->capture_default_str();
  cmd.add_option("--timeout-s", o->load.request_timeout_s, "Per-request timeout")
      ->capture_default_str();
  cmd.add_option("--api-key-env", o->api_key_env, "Environment variable holding the API key");
  cmd.add_option("--api-key-file", o->api_key_file,
                 "File holding the API key (first line), when no --api-key-env");
  cmd.add_option("--slo-ttft-ms", o->slo.ttft_ms, "Goodput limit on TTFT");
  cmd.add_option("--slo-tpot-ms", o->slo.tpot_ms, "Goodput limit on TPOT");
  cmd.add_option("--slo-e2el-ms", o->slo.e2el_ms, "Goodput limit on E2E latency");
  cmd.add_option("--result-json", o->result_json, "Write vLLM-compatible result JSON here");
}

Status ResolveBenchLoad(BenchOptions* o) {
  const bool open_loop = o->rate_flag->count() > 0 || o->ramp_flag->count() > 0;
  if (o->max_concurrency_flag->count() > 0) {
    (open_loop ? o->load.max_in_flight : o->load.concurrency) = o->max_concurrency;
  }
  const bool slots =
      o->concurrency_flag->count() > 0 || (!open_loop && o->max_concurrency_flag->count() > 0);
  if (!open_loop && !slots && o->sessions_flag->count() == 0) {
    return Status::InvalidArgument(
        "expected --concurrency C (closed loop), --rate R or --ramp (open loop), or --sessions, "
        "found none");
  }
  if (open_loop && !slots) o->load.concurrency = 0;
  if (o->sessions_flag->count() > 0 && !slots) o->load.concurrency = 0;
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
      return Status::InvalidArgument(
          fmt::format("expected --prompts jsonl:<file>, found '{}'", o->prompts));
    }
    std::vector<workload::CustomPromptLine> lines;
    if (Status s = workload::ReadCustomPrompts(path, &lines); !s.ok()) return s;
    for (auto& line : lines) {
      o->load.custom_prompts.push_back({line.prompt, line.messages_json, line.max_tokens});
    }
  }
  o->load.api = o->api == "chat" ? loadgen::Api::kChatCompletions : loadgen::Api::kCompletions;
  return ReadApiKey(o->api_key_env, "--api-key-env", o->api_key_file, "--api-key-file",
                    &o->load.api_key);
}

}  // namespace servesweep::cli
