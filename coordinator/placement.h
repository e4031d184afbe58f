// Placement: which idle agents run a run. A layout needing G GPUs goes on one agent with at least
// G GPUs when there is one; otherwise on ceil(G / g) agents with g GPUs each (the same g for the
// whole group, as tensor/pipeline groups need). The first agent is the head.
//
// Thread-safety: a pure function.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "coordinator/agent_registry.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::coordinator {

// Agent ids, head first, or nullopt when the idle agents cannot hold the run now.
std::optional<std::vector<std::string>> PlaceRun(schema::RunSpec::Reader spec,
                                                 const std::vector<const AgentEntry*>& idle);

// Whether agents with these GPU counts could ever hold the run (to refuse a sweep up front).
bool CouldEverPlace(schema::RunSpec::Reader spec, const std::vector<uint32_t>& agent_gpus);

}  // namespace servesweep::coordinator
