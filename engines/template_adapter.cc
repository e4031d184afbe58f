// An engine servesweep does not know: engine_config.command with {placeholders} (the same names
// as the flag tables: {model}, {model_path}, {host}, {port}, {tp}, {pp}, {dp}, {head},
// {dist_port}, {nnodes}, {node_rank}, ...). Started on the head only; readiness on
// engine_config.health_path (default /health), /metrics names per engine_config.metrics_persona.
#include <fmt/format.h>

#include "engines/adapters.h"
#include "engines/launch_values.h"

namespace servesweep::engines {

Status TemplateAdapter::Plan(const LaunchContext& context, EngineLaunch* out) const {
  EngineLaunch& launch = *out;
  const auto config = context.spec.getEngineConfig();
  launch.base_url = fmt::format("http://127.0.0.1:{}", context.port);
  launch.metrics_persona = config.getMetricsPersona().cStr();
  if (config.getHealthPath().size() > 0) launch.health_path = config.getHealthPath().cStr();
  launch.version = context.spec.getEngineVersion().size() > 0
                       ? context.spec.getEngineVersion().cStr()
                       : std::string();
  if (config.getCommand().size() == 0) {
    return Status::InvalidArgument(
        "engine 'template' needs engine_config.command (an argv with {placeholders})");
  }
  if (context.role != schema::Role::HEAD) return Status::Ok();
  Argv pattern;
  for (auto item : config.getCommand()) pattern.push_back(item.cStr());
  Argv argv;
  if (Status s = FillArgv(pattern, RunValues(context), &argv); !s.ok()) {
    return Status::InvalidArgument("engine_config.command: " + s.message());
  }
  for (auto flag : context.spec.getEngineFlags()) argv.push_back(flag.cStr());
  launch.processes.push_back({"engine", argv, {}});
  return Status::Ok();
}

}  // namespace servesweep::engines
