#include "cli/remote_agents.h"

#include "transport/curve_keys.h"

namespace servesweep::cli {

void AddRemoteAgentKeyOptions(CLI::App& cmd, RemoteAgentKeys& keys) {
  cmd.add_option("--secret-key", keys.secret_key,
                 "The coordinator's CurveZMQ secret key file (servesweep keygen)");
  cmd.add_option("--allowed-keys", keys.allowed_keys,
                 "File of agent public keys to admit, one per line (cat agent*.pub)");
}

Status ApplyRemoteAgentKeys(const RemoteAgentKeys& keys,
                            coordinator::CoordinatorSettings* settings) {
  if (keys.secret_key.empty() && keys.allowed_keys.empty()) return Status::Ok();
  if (keys.secret_key.empty()) {
    return Status::InvalidArgument("--allowed-keys given without --secret-key: expected both");
  }
  if (keys.allowed_keys.empty()) {
    return Status::InvalidArgument("--secret-key given without --allowed-keys: expected both");
  }
  if (settings->insecure) {
    return Status::InvalidArgument("--insecure with CurveZMQ keys: expected one or the other");
  }
  CurveKeypair keypair;
  if (Status s = ReadCurveSecretKey(keys.secret_key, &keypair); !s.ok()) return s;
  if (Status s = ReadCurveAllowList(keys.allowed_keys, &settings->allowed_agent_keys_z85);
      !s.ok()) {
    return s;
  }
  settings->curve_secret_z85 = keypair.secret_z85;
  return Status::Ok();
}

}  // namespace servesweep::cli
