#include "matrix/feasibility.h"

#include <map>

namespace servesweep::matrix {
namespace {

bool Fits(schema::RunSpec::Reader spec, uint32_t gpus, const std::vector<uint32_t>& agent_gpus) {
  std::map<uint32_t, uint32_t> count_by_gpus;
  for (uint32_t g : agent_gpus) ++count_by_gpus[g];
  for (const auto& [per_agent, count] : count_by_gpus) {
    const uint32_t agents = AgentsNeeded(spec, gpus, per_agent);
    if (agents > 0 && agents <= count) return true;
  }
  return false;
}

}  // namespace

uint32_t GpusForLayout(schema::Layout::Reader layout) {
  const uint32_t per_instance = layout.getTp() * layout.getPp();
  if (layout.getPrefillInstances() > 0) {
    return (layout.getPrefillInstances() + layout.getDecodeInstances()) * per_instance;
  }
  // Data-parallel attention splits the instance's own tp GPUs; plain dp adds replicas.
  return layout.getDpAttention() ? per_instance : per_instance * layout.getDp();
}

bool Disaggregated(schema::RunSpec::Reader spec) {
  return spec.getLayout().getPrefillInstances() > 0;
}

uint32_t PoolGpus(schema::RunSpec::Reader spec, uint32_t instances) {
  return instances * spec.getLayout().getTp() * spec.getLayout().getPp();
}

uint32_t AgentsNeeded(schema::RunSpec::Reader spec, uint32_t gpus, uint32_t gpus_per_agent) {
  const uint32_t per_node =
      spec.getLayout().getGpusPerNode() > 0 ? spec.getLayout().getGpusPerNode() : gpus_per_agent;
  if (per_node == 0 || per_node > gpus_per_agent) return 0;
  return (gpus + per_node - 1) / per_node;
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

}  // namespace servesweep::matrix
