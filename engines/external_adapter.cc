// A managed OpenAI-compatible endpoint: nothing to start. The key is read from the environment
// variable engine_config.api_key_env (or the file engine_config.api_key_file) on the agent and
// only ever sent as a bearer token.
#include <fmt/format.h>

#include <cstdlib>

#include "common/api_key.h"
#include "engines/adapters.h"

namespace servesweep::engines {

Status ExternalAdapter::Plan(const LaunchContext& context, EngineLaunch* out) const {
  EngineLaunch& launch = *out;
  const auto config = context.spec.getEngineConfig();
  std::string url = config.getBaseUrl().cStr();
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.size() >= 3 && url.compare(url.size() - 3, 3, "/v1") == 0) url.resize(url.size() - 3);
  if (url.empty()) {
    return Status::InvalidArgument("engine 'external' needs engine_config.base_url");
  }
  launch.base_url = url;
  launch.health_path = "";  // readiness: the model list
  launch.metrics_path = "";
  launch.version = context.spec.getEngineVersion().size() > 0
                       ? context.spec.getEngineVersion().cStr()
                       : "n/a: managed endpoint";
  // The key lives on this node (its environment, its file): a node without it is this node's
  // problem, another node may have it.
  if (Status s = ReadApiKey(config.getApiKeyEnv(), "engine_config.api_key_env",
                            config.getApiKeyFile(), "engine_config.api_key_file", &launch.api_key);
      !s.ok()) {
    return Status::FailedPrecondition(s.message());
  }
  return Status::Ok();
}

}  // namespace servesweep::engines
