#include "coordinator/placement.h"

#include <algorithm>
#include <map>

namespace servesweep::coordinator {
namespace {

// Nodes of `gpus_per_node` GPUs that `gpus` GPUs need, honouring an explicit layout.gpusPerNode.
uint32_t NodesFor(schema::RunSpec::Reader spec, uint32_t gpus, uint32_t gpus_per_node) {
  const uint32_t per_node =
      spec.getLayout().getGpusPerNode() > 0 ? spec.getLayout().getGpusPerNode() : gpus_per_node;
  if (per_node == 0 || per_node > gpus_per_node) return 0;
  return (gpus + per_node - 1) / per_node;
}

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
    const uint32_t nodes = NodesFor(spec, gpus, agent_gpus);
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

bool Disaggregated(schema::RunSpec::Reader spec) {
  return spec.getLayout().getPrefillInstances() > 0;
}

uint32_t PoolGpus(schema::RunSpec::Reader spec, uint32_t instances) {
  return instances * spec.getLayout().getTp() * spec.getLayout().getPp();
}

bool Fits(schema::RunSpec::Reader spec, uint32_t gpus, const std::vector<uint32_t>& agent_gpus) {
  std::map<uint32_t, uint32_t> count_by_gpus;
  for (uint32_t g : agent_gpus) ++count_by_gpus[g];
  for (const auto& [per_agent, count] : count_by_gpus) {
    const uint32_t nodes = NodesFor(spec, gpus, per_agent);
    if (nodes > 0 && nodes <= count) return true;
  }
  return false;
}

}  // namespace

std::optional<std::vector<std::string>> PlaceRun(schema::RunSpec::Reader spec,
                                                 const std::vector<const AgentEntry*>& idle) {
  std::vector<const AgentEntry*> prefill, decode;
  for (const AgentEntry* agent : idle) {
    if (agent->pool == "prefill") prefill.push_back(agent);
    if (agent->pool == "decode") decode.push_back(agent);
  }
  if (!Disaggregated(spec) || (prefill.empty() && decode.empty())) {
    return PlaceGroup(spec, spec.getGpusNeeded(), idle);
  }
  auto prefill_agents =
      PlaceGroup(spec, PoolGpus(spec, spec.getLayout().getPrefillInstances()), prefill);
  auto decode_agents =
      PlaceGroup(spec, PoolGpus(spec, spec.getLayout().getDecodeInstances()), decode);
  if (!prefill_agents || !decode_agents) return std::nullopt;
  prefill_agents->insert(prefill_agents->end(), decode_agents->begin(), decode_agents->end());
  return prefill_agents;
}

bool CouldEverPlace(schema::RunSpec::Reader spec, const std::vector<uint32_t>& agent_gpus) {
  return Fits(spec, spec.getGpusNeeded(), agent_gpus);
}

bool CouldEverPlaceInPools(schema::RunSpec::Reader spec, const std::vector<uint32_t>& prefill_gpus,
                           const std::vector<uint32_t>& decode_gpus) {
  if (!Disaggregated(spec)) {
    return Fits(spec, spec.getGpusNeeded(), prefill_gpus) ||
           Fits(spec, spec.getGpusNeeded(), decode_gpus);
  }
  return Fits(spec, PoolGpus(spec, spec.getLayout().getPrefillInstances()), prefill_gpus) &&
         Fits(spec, PoolGpus(spec, spec.getLayout().getDecodeInstances()), decode_gpus);
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
