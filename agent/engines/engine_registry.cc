#include "agent/engines/adapters.h"
#include "agent/engines/engine_adapter.h"
#include "agent/engines/sim_adapter.h"
#include "common/engine_names.h"

namespace servesweep::agent {

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

}  // namespace servesweep::agent
