#include "workload/length_distribution.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/sampling.h"

namespace servesweep::workload {

std::vector<uint32_t> SampleLengths(const LengthDistribution& d, uint32_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    double x = d.a;
    if (d.kind == "uniform") {
      x = d.a + (d.b - d.a + 1) * (Uniform01(rng) - 0x1.0p-53);  // integers a..b inclusive
      x = std::floor(x);
    } else if (d.kind == "normal") {
      x = std::round(d.a + d.b * StandardNormal(rng));
    } else if (d.kind == "lognormal") {
      x = std::round(d.a * std::exp(d.b * StandardNormal(rng)));
    } else if (d.kind == "empirical" && !d.values.empty()) {
      // One observation, uniformly (a bootstrap sample of the trace's lengths).
      const size_t k =
          std::min(d.values.size() - 1,
                   static_cast<size_t>(Uniform01(rng) * static_cast<double>(d.values.size())));
      x = d.values[k];
    }
    x = std::clamp(x, static_cast<double>(d.min), static_cast<double>(d.max));
    out.push_back(static_cast<uint32_t>(x));
  }
  return out;
}

std::string Describe(const LengthDistribution& d) {
  if (d.kind == "uniform") return fmt::format("uniform:{}-{}", d.a, d.b);
  if (d.kind == "normal") return fmt::format("normal:{}+-{}", d.a, d.b);
  if (d.kind == "lognormal") return fmt::format("lognormal:median={},sigma={}", d.a, d.b);
  if (d.kind == "empirical") {
    return d.values.empty() ? fmt::format("empirical:{}", d.source)
                            : fmt::format("empirical:{}(n={})", d.source, d.values.size());
  }
  return fmt::format("fixed:{}", d.a);
}

}  // namespace servesweep::workload
