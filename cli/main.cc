// servesweep: one binary, subcommands like git or kubectl. See README.md and docs/.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "common/logging.h"

int main(int argc, char** argv) {
  servesweep::cli::BlockStopSignals();
  CLI::App app{"servesweep: distributed benchmark orchestrator for LLM serving"};
  app.require_subcommand(1);
  app.set_version_flag("--version", SERVESWEEP_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->capture_default_str();
  int exit_code = servesweep::cli::kExitOk;
  servesweep::cli::AddRunCommand(app, &exit_code);
  servesweep::cli::AddSearchCommand(app, &exit_code);
  servesweep::cli::AddPlanCommand(app, &exit_code);
  servesweep::cli::AddCalibrateCommand(app, &exit_code);
  servesweep::cli::AddCoordinatorCommand(app, &exit_code);
  servesweep::cli::AddAgentCommand(app, &exit_code);
  servesweep::cli::AddBenchCommand(app, &exit_code);
  servesweep::cli::AddSimCommand(app, &exit_code);
  servesweep::cli::AddReportCommand(app, &exit_code);
  servesweep::cli::AddCompareCommand(app, &exit_code);
  servesweep::cli::AddBaselineCommand(app, &exit_code);
  servesweep::cli::AddProbeCommand(app, &exit_code);
  servesweep::cli::AddSubmitCommand(app, &exit_code);
  servesweep::cli::AddKeygenCommand(app, &exit_code);
  app.parse_complete_callback([&] {
    const auto* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front();
    servesweep::SetupLogging(sub ? sub->get_name() : "servesweep", log_level);
  });
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
