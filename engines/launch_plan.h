// What the agents of one run would start, as text: for each node (rank) of the run's layout,
// every engine process with its environment and argv, and where the load, readiness and
// metrics go. `servesweep plan --commands` prints it; the golden argv test pins it.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "engines/engine_adapter.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::engines {

// One launch as lines ("  [name] ENV=... argv..." and "  load: ... ready: ... metrics: ..."), or
// "  error: ..." when the adapter refused it (`planned`).
std::string DescribeLaunch(const EngineLaunch& launch, const Status& planned = Status::Ok());

// What the agent of each rank would start for `spec` (addresses as for DescribeRunLaunches).
struct RankLaunch {
  uint32_t rank = 0;
  std::string address;
  Status planned;  // the adapter's verdict on this rank's launch
  EngineLaunch launch;
};
std::vector<RankLaunch> PlanRunLaunches(schema::RunSpec::Reader spec,
                                        const std::vector<std::string>& addresses, uint16_t port,
                                        const std::string& self_executable);

// Every rank of `spec`'s layout, with `addresses[rank]` as that node's address (the head's first;
// missing ones read "node<rank>"), the front end on `port`.
std::string DescribeRunLaunches(schema::RunSpec::Reader spec,
                                const std::vector<std::string>& addresses, uint16_t port,
                                const std::string& self_executable);

}  // namespace servesweep::engines
