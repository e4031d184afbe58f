// `servesweep sim`: the engine emulator as a process, started by agents like a real engine.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <memory>

#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "sim/emulator.h"

namespace servesweep::cli {

void AddSimCommand(CLI::App& app, int* exit_code) {
  auto settings = std::make_shared<sim::EmulatorSettings>();
  auto* cmd = app.add_subcommand("sim", "Run the OpenAI-compatible engine emulator");
  cmd->add_option("--host", settings->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", settings->port, "Port (0 = any free port)")->capture_default_str();
  cmd->add_option("--model", settings->model_name, "Served model name")->capture_default_str();
  cmd->add_option("--ttft-ms", settings->ttft_ms, "Request arrival to first token, ms")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--itl-ms", settings->itl_ms, "Between tokens, ms")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--startup-ms", settings->startup_ms, "/health answers 503 this long")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--threads", settings->io_threads, "I/O threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tokens-per-chunk", settings->tokens_per_chunk,
                  "Tokens per SSE chunk (> 1 emulates speculative decoding)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--request-log", settings->request_log_path,
                  "JSONL file with every request's exact timestamps (ground truth)");
  cmd->add_option("--persona", settings->persona, "Metric names on /metrics")
      ->capture_default_str()
      ->check(CLI::IsMember({"vllm", "sglang"}));
  cmd->add_option("--max-model-len", settings->max_model_len, "Prompt + max_tokens limit")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-capacity-tok", settings->kv_capacity_tok, "KV-cache size in tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  // Fault injection: deterministic given --fault-seed (request n's faults depend on seed and n).
  sim::FaultSettings& faults = settings->faults;
  const std::string group = "Fault injection";
  cmd->add_option("--fault-seed", faults.seed, "Seed of every injected fault")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--fault-error-rate", faults.error_rate,
                  "Fraction of completion requests answered 500 (OpenAI error body)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd->add_option("--fault-stall-prob", faults.stall_probability,
                  "Fraction of streams that stall (see --fault-stall-after-tok, --fault-stall-ms)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd->add_option("--fault-stall-after-tok", faults.stall_after_tok,
                  "A stalled stream pauses once this many tokens are out")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd->add_option("--fault-stall-ms", faults.stall_ms, "How long a stalled stream pauses, ms")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd->add_option("--fault-crash-after", faults.crash_after_requests,
                  "Die (SIGKILL) when completion request N+1 arrives (0 = never)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd->add_option("--fault-broken-event-rate", faults.broken_event_rate,
                  "Fraction of streams with one SSE event whose JSON is cut short")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd->add_option("--fault-truncate-rate", faults.truncate_rate,
                  "Fraction of streams whose chunked body stops mid-chunk (connection closed)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd->callback([settings, exit_code] {
    // One descriptor per stream: lift the soft limit to the hard one so 10k+ streams fit.
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
      limit.rlim_cur = limit.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
    sim::Emulator emulator(*settings);
    try {
      emulator.Start();
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      *exit_code = kExitError;
      return;
    }
    spdlog::info("sim serving '{}' on http://{}:{} (ttft {} ms, itl {} ms)", settings->model_name,
                 settings->host, emulator.port(), settings->ttft_ms, settings->itl_ms);
    StopSignals signals([&emulator] { emulator.Stop(); });
    emulator.Run();
    *exit_code = kExitOk;
  });
}

}  // namespace servesweep::cli
