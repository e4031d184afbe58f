// The agents of a sweep on this machine: real `servesweep agent` child processes speaking ZeroMQ
// to a coordinator on a loopback port, over CurveZMQ with keys made for them (unless insecure).
// `run` starts them for its one sweep. `search` keeps them for all of its rounds: each round's
// coordinator binds the endpoint the first one bound, the agents say hello to it by themselves
// (the bye before said another sweep follows), and each keeps its engine up across rounds.
//
// Thread-safety: call from the main thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "coordinator/coordinator.h"
#include "transport/curve_keys.h"

namespace servesweep::cli {

struct LocalAgentsOptions {
  std::string home;  // agents live in HOME/agents/local-N (spool, work, agent.log)
  uint32_t agents = 1;
  uint32_t gpus_per_agent = 1;     // emulated GPUs per agent
  bool skip_engine_check = false;  // the agents' own check before each engine
  bool insecure = false;
  int heartbeat_ms = 1000;
  int liveness = 3;
};

class LocalAgents {
 public:
  explicit LocalAgents(LocalAgentsOptions options) : options_(std::move(options)) {}
  ~LocalAgents();  // Stop()
  LocalAgents(const LocalAgents&) = delete;
  LocalAgents& operator=(const LocalAgents&) = delete;

  // The coordinator settings these agents speak to: the loopback endpoint to bind (the one the
  // first coordinator bound, once there was one) and the keys (made once).
  Status Configure(coordinator::CoordinatorSettings* settings);
  // Starts the agents against the coordinator's bound `endpoint`; when they run already (they
  // are on that endpoint), starts again only any that has exited.
  Status StartFor(const std::string& endpoint);
  // After the last sweep's bye: waits for agents that leave by themselves, then stops the rest
  // (SIGTERM: an agent stops its kept engine before it exits), and removes the keys.
  void Stop(std::chrono::seconds wait_for_bye);

 private:
  Status Spawn(uint32_t i, ChildProcess* out) const;  // agent local-i on endpoint_

  LocalAgentsOptions options_;
  CurveKeypair server_keys_, agent_keys_;
  bool keys_made_ = false;
  std::string endpoint_;               // "" until started
  std::vector<std::string> security_;  // the agents' key arguments (or --insecure)
  std::vector<ChildProcess> children_;
};

}  // namespace servesweep::cli
