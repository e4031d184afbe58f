// Agents started elsewhere (by hand, by Slurm, by Kubernetes) that connect to a coordinator:
// its listening endpoint and its CurveZMQ keys, the options `coordinator` and `search --bind`
// share.
//
// Thread-safety: call from the main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/status.h"
#include "coordinator/coordinator.h"

namespace servesweep::cli {

struct RemoteAgentKeys {
  std::string secret_key;    // the coordinator's CurveZMQ secret key file
  std::string allowed_keys;  // the agents' public keys, one per line
};

// --secret-key and --allowed-keys.
void AddRemoteAgentKeyOptions(CLI::App& cmd, RemoteAgentKeys& keys);

// Reads the key files into `settings` (both or neither, and not with --insecure).
Status ApplyRemoteAgentKeys(const RemoteAgentKeys& keys,
                            coordinator::CoordinatorSettings* settings);

}  // namespace servesweep::cli
