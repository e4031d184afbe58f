#include "engines/launch_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace servesweep::engines {

std::string DescribeLaunch(const EngineLaunch& launch, const Status& planned) {
  std::string out;
  if (!launch.unchecked.empty()) out += "  unchecked: " + launch.unchecked + "\n";
  if (!planned.ok()) return out + "  error: " + planned.message() + "\n";
  if (launch.processes.empty()) out += "  (nothing started)\n";
  for (const auto& process : launch.processes) {
    std::string line = fmt::format("  [{}]", process.name);
    for (const auto& [name, value] : process.env) line += fmt::format(" {}={}", name, value);
    for (const auto& arg : process.argv) line += " " + arg;
    out += line + "\n";
  }
  if (!launch.base_url.empty()) {
    out += fmt::format(
        "  load: {}  ready: {}  metrics: {} ({}){}\n", launch.base_url,
        launch.health_path.empty() ? "/v1/models" : launch.health_path,
        launch.metrics_url.empty() ? launch.metrics_path : launch.metrics_url,
        launch.metrics_persona.empty() ? "none" : launch.metrics_persona,
        launch.cache_reset_path.empty() ? "" : "  cache reset: POST " + launch.cache_reset_path);
  }
  return out;
}

std::vector<RankLaunch> PlanRunLaunches(schema::RunSpec::Reader spec,
                                        const std::vector<std::string>& addresses, uint16_t port,
                                        const std::string& self_executable) {
  std::vector<RankLaunch> out;
  auto adapter = MakeEngineAdapter(spec.getEngine());
  const uint32_t nodes = std::max<uint32_t>(1, spec.getNodesNeeded());
  std::vector<std::string> peers;
  for (uint32_t r = 0; r < nodes; ++r) {
    peers.push_back(r < addresses.size() ? addresses[r] : fmt::format("node{}", r));
  }
  for (uint32_t rank = 0; rank < nodes; ++rank) {
    RankLaunch one{rank, peers[rank], {}, {}};
    if (!adapter) {
      one.planned = Status::FailedPrecondition(
          fmt::format("this build cannot start engine '{}'", spec.getEngine().cStr()));
      out.push_back(std::move(one));
      break;
    }
    LaunchContext context;
    context.spec = spec;
    context.role = rank == 0 ? schema::Role::HEAD : schema::Role::WORKER;
    context.rank = rank;
    context.group_size = nodes;
    context.head_address = peers[0];
    context.peer_addresses = peers;
    context.port = port;
    context.self_executable = self_executable;
    one.planned = adapter->Plan(context, &one.launch);
    out.push_back(std::move(one));
  }
  return out;
}

std::string DescribeRunLaunches(schema::RunSpec::Reader spec,
                                const std::vector<std::string>& addresses, uint16_t port,
                                const std::string& self_executable) {
  std::string out;
  const auto adapter = MakeEngineAdapter(spec.getEngine());
  for (const auto& one : PlanRunLaunches(spec, addresses, port, self_executable)) {
    if (!adapter) return "  error: " + one.planned.message() + "\n";
    out += fmt::format(" {} rank {} ({}):\n", one.rank == 0 ? "head" : "worker", one.rank,
                       one.address);
    out += DescribeLaunch(one.launch, one.planned);
  }
  return out;
}

}  // namespace servesweep::engines
