#include "coordinator/agent_registry.h"

namespace servesweep::coordinator {

AgentEntry& AgentRegistry::Hello(schema::Inventory::Reader inventory, int64_t now_ns) {
  AgentEntry& entry = agents_[inventory.getAgentId()];
  if (entry.pid != inventory.getPid()) {
    // A new agent process (or a new agent): its node is probed afresh.
    entry.probe_state = ProbeState::kNotProbed;
    entry.excluded = false;
  }
  entry.id = inventory.getAgentId();
  entry.hostname = inventory.getHostname();
  entry.address = inventory.getAddress();
  entry.gpus = inventory.getGpus().size();
  entry.gpu_model = entry.gpus > 0 ? std::string(inventory.getGpus()[0].getName()) : "none";
  entry.pool = inventory.getPool();
  entry.engines.clear();
  for (auto engine : inventory.getEngines()) entry.engines.insert(engine);
  entry.pid = inventory.getPid();
  entry.last_seen_ns = now_ns;
  entry.busy_run_id.clear();
  entry.draining_run_id.clear();
  return entry;
}

bool AgentRegistry::Reported(const std::string& id, const std::string& busy_run_id) {
  AgentEntry* entry = Find(id);
  if (entry == nullptr) return false;
  const bool was_draining = !entry->draining_run_id.empty();
  entry->draining_run_id =
      busy_run_id.empty() || busy_run_id == entry->busy_run_id ? "" : busy_run_id;
  return was_draining && entry->draining_run_id.empty() && entry->busy_run_id.empty();
}

bool AgentRegistry::Touch(const std::string& id, int64_t now_ns) {
  auto it = agents_.find(id);
  if (it == agents_.end()) return false;
  it->second.last_seen_ns = now_ns;
  return true;
}

AgentEntry* AgentRegistry::Find(const std::string& id) {
  auto it = agents_.find(id);
  return it == agents_.end() ? nullptr : &it->second;
}

void AgentRegistry::Remove(const std::string& id) { agents_.erase(id); }

std::vector<std::string> AgentRegistry::SilentSince(int64_t deadline_ns) const {
  std::vector<std::string> out;
  for (const auto& [id, entry] : agents_) {
    if (entry.last_seen_ns < deadline_ns) out.push_back(id);
  }
  return out;
}

std::vector<const AgentEntry*> AgentRegistry::Idle(bool require_probes) const {
  std::vector<const AgentEntry*> out;
  for (const auto& [id, entry] : agents_) {
    const bool probed =
        entry.probe_state == ProbeState::kHealthy || entry.probe_state == ProbeState::kUnhealthy;
    if (entry.busy_run_id.empty() && entry.draining_run_id.empty() && !entry.excluded &&
        (probed || !require_probes)) {
      out.push_back(&entry);
    }
  }
  return out;
}

std::vector<AgentEntry*> AgentRegistry::Unprobed() {
  std::vector<AgentEntry*> out;
  for (auto& [id, entry] : agents_) {
    if (entry.probe_state == ProbeState::kNotProbed && entry.busy_run_id.empty() &&
        entry.draining_run_id.empty()) {
      out.push_back(&entry);
    }
  }
  return out;
}

std::vector<std::string> AgentRegistry::Ids() const {
  std::vector<std::string> out;
  for (const auto& [id, entry] : agents_) out.push_back(id);
  return out;
}

}  // namespace servesweep::coordinator
