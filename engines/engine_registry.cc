#include "common/engine_names.h"
#include "engines/adapters.h"
#include "engines/engine_adapter.h"
#include "engines/launch_values.h"
#include "engines/sim_adapter.h"

namespace servesweep::engines {

Status FlagTableAdapter::Plan(const LaunchContext& context, EngineLaunch* launch) const {
  FlagTable table;
  if (Status s = BeginLaunch(engine_, context, &table, launch); !s.ok()) return s;
  return PlanWithTable(table, context, launch);
}

std::unique_ptr<EngineAdapter> MakeEngineAdapter(const std::string& engine) {
  if (engine == "sim") return std::make_unique<SimAdapter>();
  if (engine == "vllm") return std::make_unique<VllmAdapter>();
  if (engine == "sglang") return std::make_unique<SglangAdapter>();
  if (engine == "llamacpp") return std::make_unique<LlamacppAdapter>();
  if (engine == "template") return std::make_unique<TemplateAdapter>();
  if (engine == "external") return std::make_unique<ExternalAdapter>();
  return nullptr;
}

std::vector<std::string> AvailableEngines() { return EngineNames(); }

}  // namespace servesweep::engines
