#include "cli/local_sweep.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <vector>

#include "cli/commands.h"
#include "matrix/feasibility.h"

namespace servesweep::cli {

int RefuseUnplaceable(matrix::LoadedMatrix& matrix, const std::string& path, uint32_t agents,
                      uint32_t gpus_per_agent) {
  const std::vector<uint32_t> local_gpus(agents, gpus_per_agent);
  for (auto spec : matrix.matrix().getRuns()) {
    if (!matrix::CouldEverPlace(spec, local_gpus)) {
      spdlog::error(
          "{}: run {} [{}] needs {} GPUs; expected it to fit on {} local agent(s) of {} GPU(s) "
          "(set local.agents / --agents)",
          path, spec.getRunId().cStr(), spec.getLabel().cStr(), spec.getGpusNeeded(), agents,
          gpus_per_agent);
      return kExitError;
    }
  }
  return -1;
}

LocalAgentsOptions AgentsOptionsOf(const LocalSweepOptions& options) {
  LocalAgentsOptions o;
  o.home = options.settings.out_dir;
  o.agents = options.agents;
  o.gpus_per_agent = options.gpus_per_agent;
  o.skip_engine_check = options.skip_engine_check;
  o.insecure = options.settings.insecure;
  o.heartbeat_ms = options.settings.heartbeat_ms;
  o.liveness = options.settings.liveness;
  return o;
}

int RunLocalSweep(LocalSweepOptions options, matrix::LoadedMatrix& matrix) {
  LocalAgents own(AgentsOptionsOf(options));
  LocalAgents& agents = options.kept_agents ? *options.kept_agents : own;
  options.settings.next_sweep_follows = options.kept_agents != nullptr;
  if (Status s = agents.Configure(&options.settings); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  const int code =
      DriveSweep(options.settings, options.driver, matrix, [&](const std::string& endpoint) {
        Status s = agents.StartFor(endpoint);
        if (!s.ok()) spdlog::error("{}", s.message());
        return s.ok();
      });
  // Agents leave on the coordinator's bye; any that did not are stopped.
  if (!options.kept_agents) own.Stop(std::chrono::seconds(5));
  return code;
}

}  // namespace servesweep::cli
