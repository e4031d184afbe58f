// The coordinator's view of its agents: what each announced (GPUs, engines, address), when it
// was last heard from, and which run it is busy with. Liveness follows zguide's Paranoid Pirate:
// an agent silent for `liveness` heartbeat intervals is lost.
//
// Thread-safety: not thread-safe; owned by the coordinator's loop.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "schema/wire.capnp.h"

namespace servesweep::coordinator {

enum class ProbeState { kNotProbed, kProbing, kHealthy, kUnhealthy };

struct AgentEntry {
  std::string id;
  std::string hostname;
  std::string address;
  std::string gpu_model;
  uint32_t gpus = 0;
  std::string pool;  // "prefill", "decode", or "" for any role
  std::set<std::string> engines;
  int64_t last_seen_ns = 0;
  uint32_t pid = 0;
  std::string busy_run_id;  // the run we placed on it; "" when none
  // A run the agent reports working on that we did not (or no longer) place there: a released
  // run still tearing down, say. The agent is not idle until its heartbeat says otherwise.
  std::string draining_run_id;
  // The engine configuration whose engine the agent keeps up between runs (its heartbeat's),
  // "" for none: a pending run of it goes there first.
  std::string warm_configuration;
  ProbeState probe_state = ProbeState::kNotProbed;
  bool excluded = false;  // unhealthy and the sweep leaves unhealthy nodes out
};

class AgentRegistry {
 public:
  // Adds or refreshes an agent from its hello; returns it.
  AgentEntry& Hello(schema::Inventory::Reader inventory, int64_t now_ns);
  // Marks a message from `id` as a sign of life; false when the agent is unknown.
  bool Touch(const std::string& id, int64_t now_ns);
  // Reconciles what the agent says it is busy with; true when that made it idle.
  bool Reported(const std::string& id, const std::string& busy_run_id);
  AgentEntry* Find(const std::string& id);
  void Remove(const std::string& id);
  // Agents last heard from before `deadline_ns`.
  std::vector<std::string> SilentSince(int64_t deadline_ns) const;
  // Agents that can take a run now; with require_probes, only those whose probes reported.
  std::vector<const AgentEntry*> Idle(bool require_probes = false) const;
  // Idle agents not yet probed (probes never run beside an engine).
  std::vector<AgentEntry*> Unprobed();
  std::vector<std::string> Ids() const;
  size_t size() const { return agents_.size(); }

 private:
  std::map<std::string, AgentEntry> agents_;
};

}  // namespace servesweep::coordinator
