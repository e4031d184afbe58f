// The matrix's `search:` section (docs/search.md): what `servesweep search` looks for among the
// matrix's configurations (its load ladders: the runs that differ only in load level, length
// and repeat) and how hard it may look.
//
//   search:
//     objective: max_output_tok_per_s_per_gpu   # or max_goodput_per_gpu,
//                                               #    min_cost_per_m_output_tok,
//                                               #    max_tok_per_s_per_user,
//                                               #    min_energy_per_output_tok_j
//     constraints:                              # record columns (docs/results.md)
//       ttft_p90_ms: {max: 2000}
//       decode_median_tok_per_s: {min: 150}     # every user gets 150 tok/s (at the median)
//       success_rate: {min: 0.99}
//     load: {knob: concurrency, min: 1, max: 256}   # or request_rate (per second)
//     precision: 0.05          # the limit within 5%: stop when the bracket's top / bottom <= 1.05
//     boundary_repeats: 3      # a verdict within noise_pct of a constraint: measured 3 times
//     noise_pct: 5
//     requests_per_level: 4    # measured requests: at least this x the concurrency
//     budget: {runs: 60, gpu_hours: 4}
//
// The reading code below is the list of allowed keys (common/yaml_reader.h); every error names
// the matrix file:line:column.
//
// Thread-safety: pure functions and values.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace servesweep::search {

// What the search ranks configurations by, at each one's load limit.
enum class Objective {
  kMaxOutputTokPerSPerGpu,  // output_throughput_per_gpu
  kMaxGoodputPerGpu,        // goodput / gpu_count (requests/s meeting the SLO, per GPU)
  kMinCostPerMOutputTok,    // cost_per_mtok_output (engine_config.price)
  kMaxTokPerSPerUser,       // decode_median_tok_per_s
  kMinEnergyPerOutputTokJ,  // energy_per_output_tok_j (valid energy only)
};

struct ObjectiveInfo {
  const char* name;    // as written in the matrix
  const char* column;  // the record column it reads ("" : computed, see ObjectiveValue)
  bool higher_is_better;
  const char* unit;  // as reports print it
};
const ObjectiveInfo& InfoOf(Objective objective);

// One limit on a record column of a run: column <= max (latencies) or column >= min (rates).
struct Constraint {
  std::string column;  // e.g. "ttft_p90_ms"
  bool is_max = true;  // max: the figure may not exceed `limit`; min: may not fall below it
  double limit = 0;
};

enum class LoadKnob { kConcurrency, kRequestRate };

struct SearchBudget {
  int runs = 0;          // real runs at most (0 = no limit)
  double gpu_hours = 0;  // GPU-hours of real runs at most (0 = no limit)
  double wall_s = 0;     // wall time of the search at most (0 = no limit)
};

struct SearchSpec {
  Objective objective = Objective::kMaxOutputTokPerSPerGpu;
  std::vector<Constraint> constraints;  // in file order
  LoadKnob knob = LoadKnob::kConcurrency;
  double load_min = 1, load_max = 256;
  double precision = 0.05;
  int boundary_repeats = 3;
  double noise_pct = 5;
  int requests_per_level = 4;
  SearchBudget budget;
};

// Reads the `search:` section of the matrix `text` (named `path` in errors). A matrix without
// one is an error that says what `servesweep search` expects.
Status ParseSearchSpec(const std::string& path, const std::string& text, SearchSpec* out);

// Whether the objective or a constraint reads the run's energy: then a run whose energy is not
// valid is not counted (docs/search.md#energy).
bool UsesEnergy(const SearchSpec& spec);

// A level as a run's label says it: "concurrency=8", "request_rate=2.5".
std::string DescribeLevel(const SearchSpec& spec, double level);

// The columns a constraint may name: the latencies at p50 (median) / p90 / p95 / p99 and the
// per-request decode speed (max or min), the success rate (min), and the joules per output
// token, per total token and per request (max).
const std::vector<std::string>& ConstrainableColumns();

}  // namespace servesweep::search
