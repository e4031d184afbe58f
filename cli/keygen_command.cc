// `servesweep keygen --out DIR [--name NAME]`: a CurveZMQ keypair for a coordinator or an agent.
// DIR/NAME.secret (mode 0600) stays on its machine; DIR/NAME.pub goes to the peer: a coordinator's
// to its agents (--server-key), an agent's into the coordinator's allow-list (--allowed-keys).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "transport/curve_keys.h"

namespace servesweep::cli {

void AddKeygenCommand(CLI::App& app, int* exit_code) {
  auto dir = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>("servesweep");
  auto* cmd = app.add_subcommand("keygen", "Make a CurveZMQ keypair for a coordinator or agent");
  cmd->add_option("--out", *dir, "Folder for NAME.secret (mode 0600) and NAME.pub")->required();
  cmd->add_option("--name", *name, "File name stem, e.g. coordinator or the agent id")
      ->capture_default_str();
  cmd->callback([dir, name, exit_code] {
    CurveKeypair keypair;
    Status s = GenerateCurveKeypair(&keypair);
    if (s.ok()) s = WriteCurveKeypair(*dir, *name, keypair);
    if (!s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    fmt::print("secret key: {}/{}.secret (keep it on this machine)\n", *dir, *name);
    fmt::print("public key: {}/{}.pub ({})\n", *dir, *name, keypair.public_z85);
  });
}

}  // namespace servesweep::cli
