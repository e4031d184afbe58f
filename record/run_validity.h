// The validity gate: after a run, what the client saw is reconciled with what the engine
// counted, and the run is judged valid, invalid (with every reason) or not reconciled (the engine
// exposes no counter to check against). Definitions, tolerances and defaults:
// docs/metrics.md#certified-runs. Invalid runs stay recorded; reports, knees, Pareto frontiers and
// comparisons leave them out unless asked.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "loadgen/load_generator.h"
#include "schema/result.capnp.h"
#include "scraper/metrics_scraper.h"

namespace servesweep::record {

// One counter of the reconciliation: the client's count and the engine's increase between the
// scrape before warm-up and the one after the measured phase (-1: the engine has no such
// counter), and the difference allowed.
struct CounterCheck {
  std::string name;  // "requests", "prompt tokens", "generation tokens"
  int64_t client = 0;
  int64_t engine = -1;
  int64_t tolerance = 0;
  std::string why_unchecked;  // non-empty: not compared (no counter, no usage from the server)
  bool checked() const { return why_unchecked.empty(); }
  bool agrees() const {
    return !checked() || (engine - client <= tolerance && client - engine <= tolerance);
  }
};

struct Validity {
  schema::Validity verdict = schema::Validity::NOT_JUDGED;
  std::vector<std::string> reasons;  // why invalid (every failed check), or why not reconciled
  std::vector<CounterCheck> counters;
  uint32_t engine_restarts = 0;
  // A set prefix hit rate: the one the engine counted over the measured phase (NaN: unknown).
  double prefix_hit_rate = std::numeric_limits<double>::quiet_NaN();
  std::string Reasons() const;  // reasons joined by "; "
};

// What the gate judges.
struct ValidityInputs {
  // The requests the client sent between the two scrapes: warm-up and measured.
  std::vector<const loadgen::RequestRecord*> requests;
  uint32_t measured = 0;   // measured requests
  uint32_t completed = 0;  // of those, successful
  uint64_t measured_output_tok = 0;
  double min_success_rate = 0.95;
  // Engine signals scraped before warm-up (`before`), during the measured phase, and after it
  // (`after`); each empty when the engine has no /metrics.
  std::map<std::string, double> before, after;
  std::vector<scraper::ScrapedSample> during;
  // The workload's prefix_hit_rate (-1: none set): the engine's prefix-cache hits over its
  // queries, their increase over the measured phase (`during`), must lie within
  // workload::kPrefixHitRateTolerance of it, else the run is invalid; an engine without the
  // counters leaves the run not reconciled.
  double prefix_hit_rate_target = -1;
};

Validity JudgeValidity(const ValidityInputs& in);

// Restarts seen in the scraped counters: a counter that went down between two scrapes (a fresh
// process starts from zero), or a process start time that moved.
uint32_t CountEngineRestarts(const std::map<std::string, double>& before,
                             const std::vector<scraper::ScrapedSample>& during,
                             const std::map<std::string, double>& after);

}  // namespace servesweep::record
