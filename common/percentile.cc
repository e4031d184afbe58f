#include "common/percentile.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace servesweep {

double PercentileOfSorted(const std::vector<double>& sorted, double p) {
  const double pos = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double t = pos - static_cast<double>(lo);
  const double a = sorted[lo], b = sorted[hi];
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

}  // namespace servesweep
