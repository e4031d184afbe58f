// Engine adapters turn (run spec, role, rank, ports) into what to start: argv, environment,
// the URL the load goes to, and how to tell the engine is ready. They know how to start and stop
// engines, not how to measure them (the load generator only gets a URL).
//
// Thread-safety: adapters are stateless; Plan() may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "schema/run_spec.capnp.h"
#include "schema/wire.capnp.h"

namespace servesweep::agent {

struct LaunchContext {
  schema::RunSpec::Reader spec;
  schema::Role role = schema::Role::HEAD;
  uint32_t rank = 0;
  uint32_t group_size = 1;
  std::string head_address;
  uint16_t port = 0;            // the port the head's front end listens on
  std::string self_executable;  // for engines that are subcommands of servesweep (sim)
};

struct EngineLaunch {
  std::vector<std::string> argv;  // empty: nothing to start here
  std::vector<std::pair<std::string, std::string>> env;
  std::string base_url;  // head: where the load goes
  std::string health_path = "/health";
  std::string metrics_path = "/metrics";
  std::string metrics_persona;  // names on /metrics: "vllm", ...
  std::string version;          // engine version, when known
};

class EngineAdapter {
 public:
  virtual ~EngineAdapter() = default;
  virtual EngineLaunch Plan(const LaunchContext& context) const = 0;
};

// The adapter for `engine`, or nullptr when this build cannot start it.
std::unique_ptr<EngineAdapter> MakeEngineAdapter(const std::string& engine);
// Engines an agent can start (announced in its inventory).
std::vector<std::string> AvailableEngines();

}  // namespace servesweep::agent
