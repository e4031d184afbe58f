#include "agent/engines/engine_adapter.h"
#include "agent/engines/sim_adapter.h"

namespace servesweep::agent {

std::unique_ptr<EngineAdapter> MakeEngineAdapter(const std::string& engine) {
  if (engine == "sim") return std::make_unique<SimAdapter>();
  return nullptr;
}

std::vector<std::string> AvailableEngines() { return {"sim"}; }

}  // namespace servesweep::agent
