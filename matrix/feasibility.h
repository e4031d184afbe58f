// Placement feasibility: how many GPUs and nodes a run's layout occupies, and whether agents of
// given GPU counts could ever hold it. `plan`, `submit` and `run` refuse a sweep up front with
// these; the coordinator's placement (coordinator/placement.h) uses the same arithmetic to choose
// agents, so what is refused here is exactly what could never be placed there.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "schema/run_spec.capnp.h"

namespace servesweep::matrix {

// GPUs a layout occupies: tp*pp*dp, or (prefill + decode instances)*tp*pp when disaggregated.
uint32_t GpusForLayout(schema::Layout::Reader layout);

// Whether the run splits prefill and decode into separate instances.
bool Disaggregated(schema::RunSpec::Reader spec);

// GPUs of `instances` prefill (or decode) instances of a disaggregated run.
uint32_t PoolGpus(schema::RunSpec::Reader spec, uint32_t instances);

// Agents of `gpus_per_agent` GPUs that `gpus` GPUs need, honouring an explicit
// layout.gpusPerNode; 0 when such agents cannot hold the layout at all.
uint32_t AgentsNeeded(schema::RunSpec::Reader spec, uint32_t gpus, uint32_t gpus_per_agent);

// Whether agents with these GPU counts could ever hold the run (to refuse a sweep up front).
bool CouldEverPlace(schema::RunSpec::Reader spec, const std::vector<uint32_t>& agent_gpus);

// The same for separate prefill and decode pools (a disaggregated run uses both; any other run
// must fit one of them).
bool CouldEverPlaceInPools(schema::RunSpec::Reader spec, const std::vector<uint32_t>& prefill_gpus,
                           const std::vector<uint32_t>& decode_gpus);

}  // namespace servesweep::matrix
