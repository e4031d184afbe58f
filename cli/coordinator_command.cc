// `servesweep coordinator MATRIX --bind tcp://HOST:PORT --out DIR [--resume]`: the coordinator
// for agents started elsewhere (by hand, by Slurm, by Kubernetes).
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "cli/sweep_driver.h"

namespace servesweep::cli {

void AddCoordinatorCommand(CLI::App& app, int* exit_code) {
  auto settings = std::make_shared<coordinator::CoordinatorSettings>();
  auto matrix_path = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("coordinator", "Serve a sweep to agents that connect to it");
  cmd->add_option("matrix", *matrix_path, "Experiment matrix (YAML)")->required();
  cmd->add_option("--bind", settings->bind, "ZeroMQ endpoint to listen on")->capture_default_str();
  AddCoordinatorOptions(*cmd, *settings);
  cmd->callback([settings, matrix_path, exit_code] {
    coordinator::LoadedMatrix matrix;
    if (Status s = coordinator::LoadMatrixFile(*matrix_path, &matrix); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    *exit_code = DriveSweep(*settings, matrix, {});
  });
}

}  // namespace servesweep::cli
