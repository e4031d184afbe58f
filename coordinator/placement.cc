#include "coordinator/placement.h"

#include <algorithm>
#include <map>

#include "matrix/feasibility.h"

namespace servesweep::coordinator {
namespace {

// `gpus` GPUs on the fewest candidates of one GPU count, lowest ids first; nullopt if none fit.
std::optional<std::vector<std::string>> PlaceGroup(
    schema::RunSpec::Reader spec, uint32_t gpus, const std::vector<const AgentEntry*>& candidates) {
  std::map<uint32_t, std::vector<const AgentEntry*>> by_gpus;
  for (const AgentEntry* agent : candidates) {
    if (agent->engines.count(spec.getEngine()) == 0 || agent->gpus == 0) continue;
    by_gpus[agent->gpus].push_back(agent);
  }
  std::optional<std::vector<std::string>> best;
  for (auto& [agent_gpus, agents] : by_gpus) {
    const uint32_t nodes = matrix::AgentsNeeded(spec, gpus, agent_gpus);
    if (nodes == 0 || agents.size() < nodes) continue;
    if (best && best->size() <= nodes) continue;
    std::sort(agents.begin(), agents.end(),
              [](const AgentEntry* a, const AgentEntry* b) { return a->id < b->id; });
    std::vector<std::string> chosen;
    for (uint32_t i = 0; i < nodes; ++i) chosen.push_back(agents[i]->id);
    best = std::move(chosen);
  }
  return best;
}

}  // namespace

std::optional<std::vector<std::string>> PlaceRun(schema::RunSpec::Reader spec,
                                                 const std::vector<const AgentEntry*>& idle) {
  std::vector<const AgentEntry*> prefill, decode;
  for (const AgentEntry* agent : idle) {
    if (agent->pool == "prefill") prefill.push_back(agent);
    if (agent->pool == "decode") decode.push_back(agent);
  }
  if (!matrix::Disaggregated(spec) || (prefill.empty() && decode.empty())) {
    return PlaceGroup(spec, spec.getGpusNeeded(), idle);
  }
  auto prefill_agents =
      PlaceGroup(spec, matrix::PoolGpus(spec, spec.getLayout().getPrefillInstances()), prefill);
  auto decode_agents =
      PlaceGroup(spec, matrix::PoolGpus(spec, spec.getLayout().getDecodeInstances()), decode);
  if (!prefill_agents || !decode_agents) return std::nullopt;
  prefill_agents->insert(prefill_agents->end(), decode_agents->begin(), decode_agents->end());
  return prefill_agents;
}

void FillAssign(schema::RunSpec::Reader spec, uint32_t attempt, uint32_t rank,
                const std::vector<std::string>& agent_ids,
                const std::vector<std::string>& addresses, schema::Assign::Builder assign) {
  assign.setSpec(spec);
  assign.setAttempt(attempt);
  assign.setRole(rank == 0 ? schema::Role::HEAD : schema::Role::WORKER);
  assign.setRank(rank);
  assign.setGroupSize(static_cast<uint32_t>(agent_ids.size()));
  assign.setHeadAddress(addresses.empty() ? "" : addresses[0]);
  auto ids = assign.initAgentIds(static_cast<unsigned>(agent_ids.size()));
  for (uint32_t i = 0; i < agent_ids.size(); ++i) ids.set(i, agent_ids[i]);
  auto peers = assign.initPeerAddresses(static_cast<unsigned>(addresses.size()));
  for (uint32_t i = 0; i < addresses.size(); ++i) peers.set(i, addresses[i]);
}

}  // namespace servesweep::coordinator
