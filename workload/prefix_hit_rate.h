// A prefix-cache hit rate that is set, not hoped for (`workload.prefix_hit_rate: R`,
// docs/metrics.md#prefix-hit-rate): every prompt of the run starts with one shared prefix, its
// length R of the prompt's tokens rounded to whole cache blocks of the engine (a block-based cache
// such as vLLM's serves only full blocks), and the warm-up sends that prefix first, so a prefix
// cache can serve R of the measured prompt tokens and no more (the rest of each prompt is its
// own). The engine's counters then say what it served; the validity gate (record/run_validity.h)
// calls a run whose measured rate is more than kPrefixHitRateTolerance off the target invalid.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace servesweep::workload {

// Points of hit rate (as a fraction) a set rate may be missed by: by the plan (block rounding)
// and by the engine's measurement alike.
inline constexpr double kPrefixHitRateTolerance = 0.05;

struct SharedPrefixPlan {
  std::vector<uint32_t> prefix_len_tok;  // per request, a multiple of the block, < its input
  double rate = 0;                       // sum of prefixes / sum of inputs: what the plan allows
};

// The shared prefix of each request for `rate` (0 <= rate < 1) over cache blocks of `block_tok`
// tokens (>= 1): round(rate * input / block) blocks, at most input - 1 tokens (an engine computes
// a prompt's last token whatever it has cached). InvalidArgument, saying the nearest rate and
// the input length it needs, when the rounding misses `rate` by more than the tolerance.
Status PlanSharedPrefix(double rate, uint32_t block_tok, const std::vector<uint32_t>& input_len_tok,
                        SharedPrefixPlan* out);

}  // namespace servesweep::workload
