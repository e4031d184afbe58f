// `servesweep coordinator MATRIX --bind tcp://HOST:PORT --out DIR [--resume]`: the coordinator
// for agents started elsewhere (by hand, by Slurm, by Kubernetes).
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "cli/sweep_driver.h"
#include "transport/curve_keys.h"

namespace servesweep::cli {

void AddCoordinatorCommand(CLI::App& app, int* exit_code) {
  auto settings = std::make_shared<coordinator::CoordinatorSettings>();
  auto matrix_path = std::make_shared<std::string>();
  auto driver = std::make_shared<DriverOptions>();
  auto* cmd = app.add_subcommand("coordinator", "Serve a sweep to agents that connect to it");
  cmd->add_option("matrix", *matrix_path, "Experiment matrix (YAML)")->required();
  cmd->add_option("--bind", settings->bind, "ZeroMQ endpoint to listen on")->capture_default_str();
  AddCoordinatorOptions(*cmd, *settings, *driver);
  auto secret_key = std::make_shared<std::string>();
  auto allowed_keys = std::make_shared<std::string>();
  cmd->add_option("--secret-key", *secret_key,
                  "The coordinator's CurveZMQ secret key file (servesweep keygen)");
  cmd->add_option("--allowed-keys", *allowed_keys,
                  "File of agent public keys to admit, one per line (cat agent*.pub)");
  cmd->add_flag("--insecure", settings->insecure,
                "Plain TCP: agents unauthenticated, traffic unencrypted (not recommended)");
  cmd->callback([settings, driver, matrix_path, secret_key, allowed_keys, exit_code] {
    if (!secret_key->empty() || !allowed_keys->empty()) {
      CurveKeypair keypair;
      Status s =
          secret_key->empty()
              ? Status::InvalidArgument("--allowed-keys given without --secret-key: expected both")
              : ReadCurveSecretKey(*secret_key, &keypair);
      if (s.ok()) {
        s = allowed_keys->empty()
                ? Status::InvalidArgument(
                      "--secret-key given without --allowed-keys: expected both")
                : ReadCurveAllowList(*allowed_keys, &settings->allowed_agent_keys_z85);
      }
      if (!s.ok()) {
        spdlog::error("{}", s.message());
        *exit_code = kExitError;
        return;
      }
      settings->curve_secret_z85 = keypair.secret_z85;
      if (settings->insecure) {
        spdlog::error("--insecure with CurveZMQ keys: expected one or the other");
        *exit_code = kExitError;
        return;
      }
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
