#include "agent/loadgen/arrival_schedule.h"

#include <cmath>
#include <random>

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

}  // namespace servesweep::loadgen
