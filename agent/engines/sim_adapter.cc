#include "agent/engines/sim_adapter.h"

#include <fmt/format.h>

namespace servesweep::agent {

EngineLaunch SimAdapter::Plan(const LaunchContext& context) const {
  EngineLaunch launch;
  launch.metrics_persona = "vllm";
  launch.version = SERVESWEEP_VERSION;
  if (context.role != schema::Role::HEAD) return launch;
  const auto sim = context.spec.getSim();
  EngineProcess process;
  process.name = "engine";
  process.argv = {context.self_executable,
                  "sim",
                  "--host",
                  "127.0.0.1",
                  "--port",
                  std::to_string(context.port),
                  "--model",
                  context.spec.getModel(),
                  "--ttft-ms",
                  fmt::format("{}", sim.getTtftMs()),
                  "--itl-ms",
                  fmt::format("{}", sim.getItlMs()),
                  "--startup-ms",
                  fmt::format("{}", sim.getStartupMs())};
  launch.processes.push_back(std::move(process));
  launch.base_url = fmt::format("http://127.0.0.1:{}", context.port);
  return launch;
}

}  // namespace servesweep::agent
