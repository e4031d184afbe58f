// Percentiles as numpy computes them (numpy.percentile, method="linear"): the figures servesweep
// compares with `vllm bench serve` and the bands calibrate prints use one definition.
#pragma once

#include <vector>

namespace servesweep {

// The p-th percentile (p in [0, 100]) of `sorted` (ascending, not empty), interpolated linearly
// between the closest ranks, with numpy's _lerp (b - (b - a) * (1 - t) when t >= 0.5) so that
// results are monotone and exact at the ends.
double PercentileOfSorted(const std::vector<double>& sorted, double p);

}  // namespace servesweep
