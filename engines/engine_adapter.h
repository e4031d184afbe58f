// Engine adapters turn (run spec, role, rank, ports) into what to start: the processes (argv,
// environment), the URL the load goes to, and how to tell the engine is ready. They know how to
// start and stop engines, not how to measure them (the load generator only gets a URL).
// Adapters of real engines spell their flags from the flag tables (engines/flags/).
//
// Thread-safety: adapters are stateless; Plan() may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "schema/run_spec.capnp.h"
#include "schema/wire.capnp.h"

namespace servesweep::engines {

struct LaunchContext {
  schema::RunSpec::Reader spec;
  schema::Role role = schema::Role::HEAD;
  uint32_t rank = 0;
  uint32_t group_size = 1;
  std::string head_address;
  uint16_t port = 0;            // the port the head's front end listens on
  std::string self_executable;  // for engines that are subcommands of servesweep (sim)
  // Every agent's address by rank (head first), where known; multi-node disaggregated layouts
  // need them for the router's prefill/decode URLs.
  std::vector<std::string> peer_addresses;
  uint32_t gpus_per_node = 0;  // GPUs each agent contributes (0: from the layout, else all)
};

struct EngineProcess {
  std::string name;  // names its log file: "engine", "prefill0", "decode1", "router"
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
};

struct EngineLaunch {
  std::vector<EngineProcess> processes;  // started in order; empty: nothing to start here
  std::string base_url;                  // head: where the load goes
  std::string health_path = "/health";   // "" = no health endpoint (check /v1/models only)
  std::string metrics_path = "/metrics";
  std::string metrics_url;      // where to scrape when not base_url + metrics_path
  std::string metrics_persona;  // names on /metrics: "vllm", "sglang", "llamacpp", "" = none
  // POSTed between runs on one engine to reset its prefix cache ("" = servesweep has none for
  // this engine): vLLM's /reset_prefix_cache, SGLang's /flush_cache, the emulator's both;
  // "{slot}" in it: once per slot that GET /slots lists (llama.cpp's erase).
  std::string cache_reset_path;
  // Words of the prompt that checks the reset (about three tokens each): enough to fill one
  // cache block (vLLM's 16 tokens, the emulator's model's 512). llama.cpp caches a slot's prompt
  // token by token, and a long probe only costs a CPU prefill (seconds) twice per run.
  uint32_t reset_probe_words = 520;
  std::string version;                       // engine version, when known without asking the engine
  std::vector<std::string> version_command;  // prints the engine version (provenance)
  std::string model_file;         // local weights (or their config) to fingerprint for provenance
  std::string api_key;            // sent as a bearer token to external endpoints; never logged
  bool reuse_connections = true;  // false: the load opens a connection per request
  std::string flag_source;        // the flag table the argv was spelled from
  // Not empty: the flag table used is outside its checked versions for the run's
  // engine_version (why); only the engine's own check may let such a launch start.
  std::string unchecked;
};

class EngineAdapter {
 public:
  virtual ~EngineAdapter() = default;
  // Fills *launch for this node of the run. A failure says why the run cannot start as asked:
  // InvalidArgument when it is the run's own settings (a matrix value this engine version cannot
  // take: the same on every node, so the run is refused, never retried); FailedPrecondition
  // when it is this node (a key missing from its environment, a peer address the assignment
  // lacks). *launch may be partly filled on failure (its flag table's `unchecked`).
  virtual Status Plan(const LaunchContext& context, EngineLaunch* launch) const = 0;
};

// The adapter for `engine`, or nullptr when this build cannot start it.
std::unique_ptr<EngineAdapter> MakeEngineAdapter(const std::string& engine);
// Engines an agent can start (announced in its inventory).
std::vector<std::string> AvailableEngines();

}  // namespace servesweep::engines
