// `servesweep sim`: the engine emulator as a process, started by agents like a real engine.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <memory>

#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "common/api_key.h"
#include "sim/emulator.h"
#include "sim/model_backed_core.h"

namespace servesweep::cli {

namespace {

// Where it listens, what it serves, and the fixed schedule's timing.
void AddServingFlags(CLI::App& cmd, sim::EmulatorSettings* settings) {
  cmd.add_option("--host", settings->host, "Address to listen on")->capture_default_str();
  cmd.add_option("--port", settings->port, "Port (0 = any free port)")->capture_default_str();
  cmd.add_option("--model", settings->model_name, "Served model name")->capture_default_str();
  cmd.add_option("--ttft-ms", settings->ttft_ms, "Request arrival to first token, ms")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--itl-ms", settings->itl_ms, "Between tokens, ms")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--startup-ms", settings->startup_ms, "/health answers 503 this long")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--threads", settings->io_threads, "I/O threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--tokens-per-chunk", settings->tokens_per_chunk,
                 "Tokens per SSE chunk (> 1 emulates speculative decoding)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--request-log", settings->request_log_path,
                 "JSONL file with every request's exact timestamps (ground truth)");
  cmd.add_option("--persona", settings->persona, "Metric names on /metrics")
      ->capture_default_str()
      ->check(CLI::IsMember({"vllm", "sglang"}));
  cmd.add_option("--max-model-len", settings->max_model_len, "Prompt + max_tokens limit")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--kv-capacity-tok", settings->kv_capacity_tok, "KV-cache size in tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  // Quality tasks (docs/quality.md): how often arithmetic questions are answered correctly.
  cmd.add_option("--answer-accuracy", settings->answer_accuracy,
                 "Probability that an arithmetic quality question is answered correctly")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--answer-seed", settings->answer_seed,
                 "Seed of which questions are answered wrongly")
      ->capture_default_str();
  // Multi-LoRA (docs/matrix.md#multi-lora): adapter names served as models.
  cmd.add_option("--lora-modules", settings->lora_adapters,
                 "LoRA adapter names served beside --model (comma-separated)")
      ->delimiter(',');
  cmd.add_option("--max-loras", settings->max_loras,
                 "Adapters kept loaded, and in one step with --hardware (0 = all, never a load)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--lora-load-ms", settings->lora_load_ms,
                 "What a request whose adapter is not loaded waits for it (fixed schedule)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

// Fault injection: deterministic given --fault-seed (request n's faults depend on seed and n).
void AddFaultFlags(CLI::App& cmd, sim::FaultSettings& faults) {
  const std::string group = "Fault injection";
  cmd.add_option("--fault-seed", faults.seed, "Seed of every injected fault")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--fault-error-rate", faults.error_rate,
                 "Fraction of completion requests answered 500 (OpenAI error body)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd.add_option("--fault-stall-prob", faults.stall_probability,
                 "Fraction of streams that stall (see --fault-stall-after-tok, --fault-stall-ms)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd.add_option("--fault-stall-after-tok", faults.stall_after_tok,
                 "A stalled stream pauses once this many tokens are out")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option("--fault-stall-ms", faults.stall_ms, "How long a stalled stream pauses, ms")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option("--fault-crash-after", faults.crash_after_requests,
                 "Die (SIGKILL) when completion request N+1 arrives (0 = never)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option("--fault-broken-event-rate", faults.broken_event_rate,
                 "Fraction of streams with one SSE event whose JSON is cut short")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd.add_option("--fault-truncate-rate", faults.truncate_rate,
                 "Fraction of streams whose chunked body stops mid-chunk (connection closed)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd.add_option("--fault-empty-rate", faults.empty_stream_rate,
                 "Fraction of streams that end at once without a token (usage says 0)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  cmd.add_option("--fault-usage-undercount-tok", faults.usage_undercount_tok,
                 "Tokens the usage event leaves out of what was generated and counted")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_flag("--fault-ignore-cache-reset", faults.ignore_cache_reset,
               "Answer /reset_prefix_cache and /flush_cache with success, resetting nothing")
      ->group(group);
}

// The performance model instead of the fixed schedule: every option needs --hardware.
void AddModelFlags(CLI::App& cmd, sim::ModelBackedOptions* model) {
  const char* model_group = "Performance model (instead of the fixed schedule; docs/perfmodel.md)";
  auto* hardware = cmd.add_option("--hardware", model->hardware,
                                  "Hardware profile: a shipped name (h200, ...) or a YAML path")
                       ->group(model_group);
  cmd.add_option("--model-profile", model->model_profile,
                 "Model profile (default: inferred from --model)")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--engine-profile", model->engine_profile,
                 "Engine profile: its coefficients and calibration (a shipped name such as "
                 "vllm-0.8, or a YAML path; docs/perfmodel.md)")
      ->capture_default_str()
      ->needs(hardware)
      ->group(model_group);
  auto& d = model->deployment;
  cmd.add_option("--tp", d.tp, "Tensor parallel size")->needs(hardware)->group(model_group);
  cmd.add_option("--pp", d.pp, "Pipeline parallel size")->needs(hardware)->group(model_group);
  cmd.add_option("--dp", d.dp, "Data parallel replicas")->needs(hardware)->group(model_group);
  cmd.add_flag("--expert-parallel", model->expert_parallel, "Experts over tp x dp GPUs")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--prefill-instances", d.prefill_instances, "Disaggregated prefill instances")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--decode-instances", d.decode_instances, "Disaggregated decode instances")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--precision", d.precision, "Weight precision (native, bf16, fp8, fp4)")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--kv-cache-dtype", d.kv_dtype, "KV-cache dtype (auto, bf16, fp8, fp4)")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--max-lora-rank", d.lora_rank,
                 "LoRA rank the model's adapter buffers hold (with --lora-modules; 0 = 16)")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--api-server-count", d.api_servers,
                 "API-server processes sharing the requests (vLLM's spelling; the profile's "
                 "cpu.api_request_us and cpu.api_token_us are each one's serial CPU)")
      ->check(CLI::PositiveNumber)
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--max-num-seqs", d.max_num_seqs, "Running requests per step at most")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--max-num-batched-tokens", d.max_num_batched_tokens, "Tokens per step at most")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--spec-tokens", d.spec_num_tok, "Speculative decoding: draft tokens per step")
      ->needs(hardware)
      ->group(model_group);
  cmd.add_option("--spec-accepted", d.spec_mean_accepted_tok,
                 "Speculative decoding: mean accepted tokens per step")
      ->needs(hardware)
      ->group(model_group);
}

}  // namespace

void AddSimCommand(CLI::App& app, int* exit_code) {
  auto settings = std::make_shared<sim::EmulatorSettings>();
  auto model = std::make_shared<sim::ModelBackedOptions>();
  auto* cmd = app.add_subcommand("sim", "Run the OpenAI-compatible engine emulator");
  AddServingFlags(*cmd, settings.get());
  auto api_key_file = std::make_shared<std::string>();
  cmd->add_option("--api-key-file", *api_key_file,
                  "Answer /v1/* only with this file's first line as the Bearer key (401 else), "
                  "as a managed API does");
  AddFaultFlags(*cmd, settings->faults);
  AddModelFlags(*cmd, model.get());
  cmd->callback([settings, model, api_key_file, cmd, exit_code] {
    if (Status s = ReadApiKey("", "", *api_key_file, "--api-key-file", &settings->api_key);
        !s.ok()) {
      spdlog::error("sim: {}", s.message());
      *exit_code = kExitError;
      return;
    }
    // One descriptor per stream: lift the soft limit to the hard one so 10k+ streams fit.
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
      limit.rlim_cur = limit.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
    std::unique_ptr<sim::EngineCore> core;
    if (!model->hardware.empty()) {
      if (Status s = sim::MakeModelBackedCore(*model, cmd->count("--startup-ms") > 0,
                                              settings.get(), &core);
          !s.ok()) {
        spdlog::error("sim: {}", s.message());
        *exit_code = kExitError;
        return;
      }
    }
    sim::Emulator emulator =
        core ? sim::Emulator(*settings, std::move(core)) : sim::Emulator(*settings);
    if (Status s = emulator.Start(); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    spdlog::info("sim serving '{}' on http://{}:{} ({})", settings->model_name, settings->host,
                 emulator.port(),
                 model->hardware.empty() ? fmt::format("fixed schedule: ttft {} ms, itl {} ms",
                                                       settings->ttft_ms, settings->itl_ms)
                                         : "performance model");
    StopSignals signals([&emulator] { emulator.Stop(); });
    emulator.Run();
    *exit_code = kExitOk;
  });
}

}  // namespace servesweep::cli
