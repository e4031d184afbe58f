// One engine deployment on this agent and what it has served: started for a run, and under
// engine_lifecycle per_configuration kept up for the next runs of its configuration
// (docs/matrix.md#engine-lifecycle). The agent holds a kept one between runs and hands it to
// the next run's executor, which reuses it when the run's configuration is its own and stops
// it otherwise. Destroying it stops its processes.
//
// Thread-safety: owned by one thread at a time (the agent's loop between runs, a run's thread
// during one); never shared.
#pragma once

#include <capnp/message.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/engine_processes.h"
#include "engines/engine_adapter.h"
#include "record/record_builder.h"
#include "schema/result.capnp.h"

namespace servesweep::agent {

struct ServingEngine {
  ServingEngine() = default;
  ~ServingEngine() { group.Stop(std::chrono::seconds(10)); }
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  std::string configuration;  // the spec's engineConfiguration
  // On several agents: the placement it was started in (agent ids, head first) and this
  // agent's rank in it; reused only in the same placement, at the same rank.
  std::string placement;
  uint32_t rank = 0;
  std::string engine_id;  // "<first run id>.<attempt>@<agent>"
  engines::EngineLaunch launch;
  EngineGroup group;
  std::string log_prefix;    // its logs are the first run's
  record::NodeFacts node;    // read when it started (version, fingerprint, GPU facts)
  int64_t started_ns = 0;    // steady clock: the processes' spawn
  uint32_t runs_served = 0;  // runs measured on it so far
  // What the engine check resolved when it started (the record's effectiveSettings and their
  // source), copied into each later run's record.
  capnp::MallocMessageBuilder effective;  // root: schema::BenchmarkRecord, those two fields
};

}  // namespace servesweep::agent
