#include "agent/loadgen/arrival_schedule.h"

#include <cmath>
#include <random>

#include "common/sampling.h"

namespace servesweep::loadgen {

double ExponentialGapS(uint64_t uniform_bits, double rate_per_s) {
  // u in (0, 1]: the top 53 bits plus one, so log(u) is finite. Done by hand because
  // std::exponential_distribution's output differs between standard libraries.
  double u = (static_cast<double>(uniform_bits >> 11) + 1.0) * 0x1.0p-53;
  return -std::log(u) / rate_per_s;
}

std::vector<int64_t> PoissonScheduleNs(uint32_t count, double rate_per_s, uint64_t seed) {
  std::vector<int64_t> out(count, 0);
  if (std::isinf(rate_per_s)) return out;
  std::mt19937_64 rng(seed);
  double t_s = 0;
  for (uint32_t i = 1; i < count; ++i) {
    t_s += ExponentialGapS(rng(), rate_per_s);
    out[i] = std::llround(t_s * 1e9);
  }
  return out;
}

namespace {

// Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 through Gamma(shape + 1) x U^(1/shape).
double StandardGamma(std::mt19937_64& rng, double shape) {
  if (shape < 1) return StandardGamma(rng, shape + 1) * std::pow(Uniform01(rng), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = StandardNormal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = Uniform01(rng);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace

std::vector<int64_t> GammaScheduleNs(uint32_t count, double rate_per_s, double burstiness,
                                     uint64_t seed) {
  if (burstiness == 1.0 || std::isinf(rate_per_s)) return PoissonScheduleNs(count, rate_per_s, seed);
  std::vector<int64_t> out(count, 0);
  std::mt19937_64 rng(seed);
  const double scale_s = 1.0 / (rate_per_s * burstiness);
  double t_s = 0;
  for (uint32_t i = 1; i < count; ++i) {
    t_s += StandardGamma(rng, burstiness) * scale_s;
    out[i] = std::llround(t_s * 1e9);
  }
  return out;
}

}  // namespace servesweep::loadgen
