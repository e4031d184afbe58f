#include "search/level_verdict.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace servesweep::search {

LevelVerdict JudgeLevel(const SearchSpec& spec, const Figures& figures) {
  LevelVerdict v;
  double lowest = std::numeric_limits<double>::infinity();
  for (const Constraint& c : spec.constraints) {
    const auto at = figures.find(c.column);
    double margin_pct = -std::numeric_limits<double>::infinity();
    if (at == figures.end() || std::isnan(at->second)) {
      // A figure the run does not have cannot be shown to meet its limit.
      if (v.missing.empty()) v.missing = c.column;
    } else {
      // Inside (+) or past (-) the limit, as a share of the limit.
      const double inside = c.is_max ? c.limit - at->second : at->second - c.limit;
      margin_pct = c.limit == 0 ? inside * 100 : inside / std::abs(c.limit) * 100;
      if (std::abs(margin_pct) <= spec.noise_pct) v.close = true;
    }
    if (margin_pct < lowest) {
      lowest = margin_pct;
      v.binding = c.column;
      v.margin_pct = margin_pct;
    }
  }
  v.meets = lowest >= 0;
  return v;
}

double ObjectiveValue(Objective objective, const Figures& figures) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto get = [&](const char* column) {
    const auto at = figures.find(column);
    return at == figures.end() ? nan : at->second;
  };
  if (objective == Objective::kMaxGoodputPerGpu) {
    const double gpus = get("gpu_count");
    return gpus > 0 ? get("goodput") / gpus : nan;
  }
  return get(InfoOf(objective).column);
}

bool Better(Objective objective, double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return InfoOf(objective).higher_is_better ? a > b : a < b;
}

}  // namespace servesweep::search
