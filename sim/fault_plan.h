// Which injected faults hit a request: a pure function of (seed, request sequence number), so a
// run is reproducible given its seed whatever the interleaving of connections. Each fault kind
// draws from its own stream, so changing one rate does not move the others' victims.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "sim/emulator.h"

namespace servesweep::sim {

struct RequestFaults {
  bool error = false;         // answer 500 with an OpenAI error body, generate nothing
  bool stall = false;         // pause the stream stall_ms after stall_after_tok tokens
  bool broken_event = false;  // one event (the one holding the middle token) has cut-off JSON
  bool truncate = false;      // the chunked body stops mid-chunk (at the middle token), closed
  bool empty_stream = false;  // a 200 stream that ends at once, no token (usage says 0)
};

RequestFaults PlanFaults(const FaultSettings& faults, uint64_t seq);

// A uniform draw in [0, 1) for (seed, stream, seq); exposed for tests.
double FaultDraw(uint64_t seed, uint64_t stream, uint64_t seq);

}  // namespace servesweep::sim
