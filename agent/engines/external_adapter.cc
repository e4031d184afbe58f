// A managed OpenAI-compatible endpoint: nothing to start. The key is read from the environment
// variable engine_config.api_key_env on the agent and only ever sent as a bearer token.
#include <fmt/format.h>

#include <cstdlib>

#include "agent/engines/adapters.h"

namespace servesweep::agent {

EngineLaunch ExternalAdapter::Plan(const LaunchContext& context) const {
  EngineLaunch launch;
  const auto config = context.spec.getEngineConfig();
  std::string url = config.getBaseUrl().cStr();
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.size() >= 3 && url.compare(url.size() - 3, 3, "/v1") == 0) url.resize(url.size() - 3);
  if (url.empty()) {
    launch.error = "engine 'external' needs engine_config.base_url";
    return launch;
  }
  launch.base_url = url;
  launch.health_path = "";  // readiness: the model list
  launch.metrics_path = "";
  launch.version = context.spec.getEngineVersion().size() > 0
                       ? context.spec.getEngineVersion().cStr()
                       : "n/a: managed endpoint";
  if (config.getApiKeyEnv().size() > 0) {
    const char* key = std::getenv(config.getApiKeyEnv().cStr());
    if (key == nullptr || *key == '\0') {
      launch.error = fmt::format("environment variable {} (engine_config.api_key_env) is not set",
                                 config.getApiKeyEnv().cStr());
      return launch;
    }
    launch.api_key = key;
  }
  return launch;
}

}  // namespace servesweep::agent
