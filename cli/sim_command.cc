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
  cmd->add_option("--request-log", settings->request_log_path,
                  "JSONL file with every request's exact timestamps (ground truth)");
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
