// Token-length distributions of a workload: fixed, uniform, normal or lognormal, clamped to
// [min, max], sampled from a seeded generator by hand (no std:: distribution: their output
// differs between standard libraries), so a matrix gives the same lengths on every machine.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace servesweep::workload {

struct LengthDistribution {
  std::string kind = "fixed";  // "fixed", "uniform", "normal", "lognormal", "empirical"
  double a = 0;                // fixed: the length; uniform: low; normal: mean; lognormal: median
  double b = 0;                // uniform: high; normal: std; lognormal: sigma (of log length)
  uint32_t min = 1;
  uint32_t max = 1u << 20;
  std::vector<uint32_t> values;  // empirical: the observed lengths drawn from
  std::string source;            // empirical: where they came from (for Describe)
};

// `count` lengths, reproducible from `seed`.
std::vector<uint32_t> SampleLengths(const LengthDistribution& d, uint32_t count, uint64_t seed);

// "uniform:64-512", "normal:256+-64", "lognormal:median=256,sigma=0.5", "fixed:128",
// "empirical:<source>(n=<observations>)" ("empirical:<source>" before the values are read).
std::string Describe(const LengthDistribution& d);

}  // namespace servesweep::workload
