// A run executed in virtual time: instead of starting an engine and sending HTTP load, the run
// spec's workload goes through the performance model (perfmodel/), and the requests it
// simulates are measured with the same metric code as real runs (loadgen::Summarize,
// FillFigures). The result is a RunResult like the executor's, marked simulated in its record,
// so `servesweep plan --simulate` writes the same results database and reports as a sweep.
//
// What a virtual run does not model: warm-up (the model has no JIT or cache state to warm;
// warm-up requests are skipped), prompt text (lengths only), and client overheads. Duration
// mode and multi-turn sessions are refused (a fixed list of requests is replayed); constant
// gaps and ramps use the load generator's own schedule.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "common/status.h"
#include "schema/result.capnp.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::agent {

// What one simulated run gave.
struct SimulatedRun {
  std::string hardware;  // profile names used
  std::string model;
  double cold_start_s = 0;  // process start -> ready (weights, graphs)
  double duration_s = 0;    // measured phase: first request sent -> last one done
  uint32_t completed = 0;
  uint32_t rejected = 0;  // never fit in the KV cache
};

// Runs `spec`'s workload through the model (no record); fails on unknown profiles or a layout
// whose weights do not fit.
Status SimulateRun(schema::RunSpec::Reader spec, const std::string& default_hardware,
                   SimulatedRun* out);

// Simulates `spec` and fills `result` (status ok, or failed with the reason).
void ExecuteVirtualRun(schema::RunSpec::Reader spec, const std::string& default_hardware,
                       schema::RunResult::Builder result);

}  // namespace servesweep::agent
