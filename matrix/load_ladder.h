// A run's load ladder: the runs that differ from it only in their load level (concurrency, request
// rate, an open loop's cap), their length (num_requests, warmup_requests: often scaled with the
// level), their repeat, seed and identity. When a level of a ladder is
// over-saturated (loadgen/early_stop.h), the levels above it would only measure a longer queue:
// the coordinator skips them (docs/matrix.md#early-stop).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "schema/run_spec.capnp.h"

namespace servesweep::matrix {

// "ladder-" and 12 hex digits of a stable hash of everything in the spec but its load level,
// length, repeat, seed and identity (run id, index, label, compare group, baseline).
std::string LoadLadderOf(schema::RunSpec::Reader spec);

struct LoadLevel {
  uint32_t concurrency = 0;
  double request_rate_per_s = 0;
  uint32_t max_in_flight = 0;
};
LoadLevel LoadLevelOf(schema::RunSpec::Reader spec);

// `a` puts more load than `b`: no less of every knob, and more of one. A cap of 0 is none, so
// it is above every cap.
bool IsAbove(const LoadLevel& a, const LoadLevel& b);

// "concurrency 32", "request_rate 8/s", "request_rate 8/s max_in_flight 64".
std::string DescribeLoadLevel(const LoadLevel& level);

// A skipped run's error: which level of its ladder (run `saturated_run_id`) was over-saturated,
// and the evidence.
std::string SkippedBecause(const LoadLevel& saturated, const std::string& saturated_run_id,
                           const std::string& evidence);

// The levels found over-saturated so far, per ladder, for a caller that runs a matrix in order
// (plan --simulate): which later runs to skip, as the coordinator does.
class SaturatedLevels {
 public:
  void Add(schema::RunSpec::Reader spec, const std::string& evidence);
  // SkippedBecause for `spec` when a level of its ladder below it was over-saturated; else "".
  std::string SkipReason(schema::RunSpec::Reader spec) const;

 private:
  struct Saturated {
    LoadLevel level;
    std::string run_id, evidence;
  };
  std::map<std::string, std::vector<Saturated>> by_ladder_;
};

}  // namespace servesweep::matrix
