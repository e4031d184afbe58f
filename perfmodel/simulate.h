// SimulateWorkload: runs a workload through an EngineModel in virtual time, as fast as the host
// can (a 1000-request run takes milliseconds), and returns what each request saw: its arrival,
// each token chunk's time, its end. `servesweep plan --simulate` and the tests use it.
//
// Two arrival modes, as a benchmark client has:
//  - open loop (concurrency == 0): each request arrives at its arrival_ns;
//  - closed loop (concurrency == N): N requests start at time 0 and each end (finish or
//    rejection) lets the next one in at that instant; arrival_ns is ignored;
//  - open loop with a cap (concurrency == 0, max_in_flight == N): each request is due at its
//    arrival_ns and sent then or, when N are in flight, at the next end (it waits on the client,
//    as the load generator's requests do); its arrival at the engine is when it is sent, and
//    RequestRecord::scheduled_ns keeps when it was due.
// A closed loop with repeat_until_ns > 0 (duration mode) keeps going after the list: each end
// before that time sends a copy of the last request (ids counting on from the largest).
//
// Thread-safety: pure function; runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "perfmodel/deployment.h"
#include "perfmodel/engine_model.h"
#include "perfmodel/profiles.h"

namespace servesweep::perfmodel {

struct Workload {
  std::vector<RequestSpec> requests;  // issue order (closed loop) or any order (open loop)
  int concurrency = 0;
  // Open loop only: at most this many requests in flight (0 = no cap); a request due while the
  // cap is reached waits on the client side and is sent when one ends (as the load generator).
  int max_in_flight = 0;
  // Closed loop only: after the list, an end before this time sends another copy of the last
  // request (a timed window, the load generator's duration mode); 0 = stop at the list's end.
  int64_t repeat_until_ns = 0;
  // The LoRA adapter of the n-th request sent (its index in send order, copies included), as
  // the load generator draws it; empty = each request's own RequestSpec::adapter.
  std::function<int32_t(uint64_t)> adapter_of;
  // Every this many ns of virtual time, a snapshot of the engine's gauges and counters goes to
  // SimulationResult::samples (0 = none), as a /metrics scraper would see them.
  int64_t sample_interval_ns = 0;
};

struct TokenChunk {
  int64_t time_ns = 0;
  int32_t tokens = 0;
};

struct RequestRecord {
  uint64_t id = 0;
  int64_t scheduled_ns = 0;     // when the client meant to send it (the arrival, or a due time)
  int64_t arrival_ns = 0;       // when it was sent (the engine saw it after its front end)
  int64_t first_token_ns = -1;  // -1: never (rejected)
  int64_t finish_ns = -1;
  int32_t input_tok = 0;
  int32_t output_tok = 0;
  int32_t preemptions = 0;
  int32_t adapter = -1;  // its LoRA adapter (RequestSpec::adapter)
  bool rejected = false;
  std::vector<TokenChunk> chunks;  // the first token's chunk included
};

// Means over the requests that finished; times in ns.
struct WorkloadSummary {
  int64_t finished = 0;
  double ttft_mean_ns = 0;
  double tpot_mean_ns = 0;       // (finish - first token) / (output tokens - 1), per request
  double itl_chunk_mean_ns = 0;  // gap between consecutive chunks
  double e2e_mean_ns = 0;
  double output_tok_per_s = 0;  // all output tokens / (last finish - first arrival)
  double chunk_tok_mean = 0;    // tokens per chunk after the first
  int64_t makespan_ns = 0;
};

struct SimulationResult {
  std::vector<RequestRecord> requests;  // in the order of Workload::requests, then repeats
  std::vector<EngineSnapshot> samples;  // every sample_interval_ns, and one at the end
  EngineSnapshot final_snapshot;
  WorkloadSummary summary;
};

Status SimulateWorkload(const HardwareProfile& hw, const ModelProfile& model,
                        const DeploymentConfig& deployment, const Workload& workload,
                        SimulationResult* out);

WorkloadSummary Summarize(const std::vector<RequestRecord>& records);

}  // namespace servesweep::perfmodel
