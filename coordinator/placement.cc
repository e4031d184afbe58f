#include "coordinator/placement.h"

#include <algorithm>
#include <map>

namespace servesweep::coordinator {
namespace {

// Nodes of `gpus_per_node` GPUs the run needs, honouring an explicit layout.gpusPerNode.
uint32_t NodesFor(schema::RunSpec::Reader spec, uint32_t gpus_per_node) {
  const uint32_t per_node = spec.getLayout().getGpusPerNode() > 0
                                ? spec.getLayout().getGpusPerNode()
                                : gpus_per_node;
  if (per_node == 0 || per_node > gpus_per_node) return 0;
  return (spec.getGpusNeeded() + per_node - 1) / per_node;
}

}  // namespace

std::optional<std::vector<std::string>> PlaceRun(schema::RunSpec::Reader spec,
                                                 const std::vector<const AgentEntry*>& idle) {
  // Candidates that can start this engine, grouped by GPU count; fewest nodes wins.
  std::map<uint32_t, std::vector<const AgentEntry*>> by_gpus;
  for (const AgentEntry* agent : idle) {
    if (agent->engines.count(spec.getEngine()) == 0 || agent->gpus == 0) continue;
    by_gpus[agent->gpus].push_back(agent);
  }
  std::optional<std::vector<std::string>> best;
  for (auto& [gpus, agents] : by_gpus) {
    const uint32_t nodes = NodesFor(spec, gpus);
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

bool CouldEverPlace(schema::RunSpec::Reader spec, const std::vector<uint32_t>& agent_gpus) {
  std::map<uint32_t, uint32_t> count_by_gpus;
  for (uint32_t g : agent_gpus) ++count_by_gpus[g];
  for (const auto& [gpus, count] : count_by_gpus) {
    const uint32_t nodes = NodesFor(spec, gpus);
    if (nodes > 0 && nodes <= count) return true;
  }
  return false;
}

}  // namespace servesweep::coordinator
