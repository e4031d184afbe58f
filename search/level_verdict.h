// Whether one load level of a configuration meets the search's constraints, judged on a run's
// record columns (real, or the performance model's), and the objective's value there.
//
// A verdict is "close" when a constraint's figure lies within noise_pct of its limit (either
// side): such a verdict may be the run's noise, so the search measures the level again and
// decides on the median of its repeats (load_limit.h).
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>

#include "search/search_spec.h"

namespace servesweep::search {

using Figures = std::map<std::string, double>;  // record columns by name

struct LevelVerdict {
  bool meets = false;
  bool close = false;     // a figure within noise_pct of its limit
  std::string binding;    // the violated constraint, or else the one nearest its limit
  double margin_pct = 0;  // how far the binding figure is inside (+) or past (-) its limit, %
  std::string missing;    // a constrained column the run does not have ("" if none)
};

LevelVerdict JudgeLevel(const SearchSpec& spec, const Figures& figures);

// The objective's value in `figures` (NaN when the run lacks it: no price for a cost objective).
double ObjectiveValue(Objective objective, const Figures& figures);

// Whether objective value `a` is better than `b` (NaN is never better).
bool Better(Objective objective, double a, double b);

}  // namespace servesweep::search
