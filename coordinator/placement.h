// Placement: which idle agents run a run. A layout needing G GPUs goes on one agent with at least
// G GPUs when there is one; otherwise on ceil(G / g) agents with g GPUs each (the same g for the
// whole group, as tensor/pipeline groups need). The first agent is the head.
// A disaggregated layout, when agents announce pools, puts its prefill instances on the
// "prefill" pool and its decode instances on the "decode" pool (head: the first prefill agent).
//
// Thread-safety: a pure function.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "coordinator/agent_registry.h"
#include "schema/run_spec.capnp.h"
#include "schema/wire.capnp.h"

namespace servesweep::coordinator {

// Agent ids, head first, or nullopt when the idle agents cannot hold the run now.
std::optional<std::vector<std::string>> PlaceRun(schema::RunSpec::Reader spec,
                                                 const std::vector<const AgentEntry*>& idle);

// The assignment of placement rank `rank`: role, rank, group size, the head's address, and every
// agent's id and address in placement order (the disaggregated routers need each instance's
// agent). `addresses[i]` is the address agent `agent_ids[i]` announced.
void FillAssign(schema::RunSpec::Reader spec, uint32_t attempt, uint32_t rank,
                const std::vector<std::string>& agent_ids,
                const std::vector<std::string>& addresses, schema::Assign::Builder assign);

}  // namespace servesweep::coordinator
