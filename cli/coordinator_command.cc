// `servesweep coordinator MATRIX --bind tcp://HOST:PORT --out DIR [--resume]`: the coordinator
// for agents started elsewhere (by hand, by Slurm, by Kubernetes).
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "cli/remote_agents.h"
#include "cli/sweep_driver.h"

namespace servesweep::cli {

void AddCoordinatorCommand(CLI::App& app, int* exit_code) {
  auto settings = std::make_shared<coordinator::CoordinatorSettings>();
  auto matrix_path = std::make_shared<std::string>();
  auto driver = std::make_shared<DriverOptions>();
  auto keys = std::make_shared<RemoteAgentKeys>();
  auto* cmd = app.add_subcommand("coordinator", "Serve a sweep to agents that connect to it");
  cmd->add_option("matrix", *matrix_path, "Experiment matrix (YAML)")->required();
  cmd->add_option("--bind", settings->bind, "ZeroMQ endpoint to listen on")->capture_default_str();
  AddCoordinatorOptions(*cmd, *settings, *driver);
  AddRemoteAgentKeyOptions(*cmd, *keys);
  cmd->add_flag("--insecure", settings->insecure,
                "Plain TCP: agents unauthenticated, traffic unencrypted (not recommended)");
  cmd->callback([settings, driver, matrix_path, keys, exit_code] {
    if (Status s = ApplyRemoteAgentKeys(*keys, settings.get()); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    matrix::LoadedMatrix matrix;
    if (Status s = matrix::LoadMatrixFile(*matrix_path, &matrix); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    *exit_code = DriveSweep(*settings, *driver, matrix, {});
  });
}

}  // namespace servesweep::cli
