#include "workload/length_distribution.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace servesweep::workload {
namespace {

double Uniform01(std::mt19937_64& rng) {   // in (0, 1]
  return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
}

double StandardNormal(std::mt19937_64& rng) {   // Box-Muller, one of the pair
  const double u1 = Uniform01(rng), u2 = Uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

}  // namespace

std::vector<uint32_t> SampleLengths(const LengthDistribution& d, uint32_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    double x = d.a;
    if (d.kind == "uniform") {
      x = d.a + (d.b - d.a + 1) * (Uniform01(rng) - 0x1.0p-53);   // integers a..b inclusive
      x = std::floor(x);
    } else if (d.kind == "normal") {
      x = std::round(d.a + d.b * StandardNormal(rng));
    } else if (d.kind == "lognormal") {
      x = std::round(d.a * std::exp(d.b * StandardNormal(rng)));
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
  return fmt::format("fixed:{}", d.a);
}

}  // namespace servesweep::workload
