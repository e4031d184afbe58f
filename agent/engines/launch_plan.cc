#include "agent/engines/launch_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace servesweep::agent {

std::string DescribeLaunch(const EngineLaunch& launch) {
  if (!launch.error.empty()) return "  error: " + launch.error + "\n";
  std::string out;
  if (launch.processes.empty()) out += "  (nothing started)\n";
  for (const auto& process : launch.processes) {
    std::string line = fmt::format("  [{}]", process.name);
    for (const auto& [name, value] : process.env) line += fmt::format(" {}={}", name, value);
    for (const auto& arg : process.argv) line += " " + arg;
    out += line + "\n";
  }
  if (!launch.base_url.empty()) {
    out += fmt::format("  load: {}  ready: {}  metrics: {} ({})\n", launch.base_url,
                       launch.health_path.empty() ? "/v1/models" : launch.health_path,
                       launch.metrics_url.empty() ? launch.metrics_path : launch.metrics_url,
                       launch.metrics_persona.empty() ? "none" : launch.metrics_persona);
  }
  return out;
}

std::string DescribeRunLaunches(schema::RunSpec::Reader spec,
                                const std::vector<std::string>& addresses, uint16_t port,
                                const std::string& self_executable) {
  auto adapter = MakeEngineAdapter(spec.getEngine());
  if (!adapter)
    return fmt::format("  error: this build cannot start engine '{}'\n", spec.getEngine().cStr());
  const uint32_t nodes = std::max<uint32_t>(1, spec.getNodesNeeded());
  std::vector<std::string> peers;
  for (uint32_t r = 0; r < nodes; ++r) {
    peers.push_back(r < addresses.size() ? addresses[r] : fmt::format("node{}", r));
  }
  std::string out;
  for (uint32_t rank = 0; rank < nodes; ++rank) {
    LaunchContext context;
    context.spec = spec;
    context.role = rank == 0 ? schema::Role::HEAD : schema::Role::WORKER;
    context.rank = rank;
    context.group_size = nodes;
    context.head_address = peers[0];
    context.peer_addresses = peers;
    context.port = port;
    context.self_executable = self_executable;
    out += fmt::format(" {} rank {} ({}):\n", rank == 0 ? "head" : "worker", rank, peers[rank]);
    out += DescribeLaunch(adapter->Plan(context));
  }
  return out;
}

}  // namespace servesweep::agent
