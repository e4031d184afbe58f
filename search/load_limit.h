// The highest load level of one configuration that meets every constraint, found by measuring
// (docs/search.md#the-load-limit). A pure state machine: it says which level to measure next,
// the caller measures it (a real run, or the performance model) and hands back the verdict.
//
//   bracket: from the start level (the model's predicted limit), step up while levels meet and
//            down while they fail, within [load.min, load.max]; the first step is the model's
//            error band (a good model: a narrow bracket at once), each next one its square, up
//            to doubling;
//   narrow:  bisect the bracket (geometric mean; whole numbers for concurrency) until its top /
//            bottom <= 1 + precision, or the two are adjacent concurrencies;
//   noise:   a close verdict (a figure within noise_pct of its limit) is measured again, up to
//            boundary_repeats times in all; the level is decided on the median of its repeats'
//            margins, and as soon as two repeats agree on the side (the rest cannot outvote them
//            when boundary_repeats <= 3; with more repeats, a majority decides).
//
// Levels only move up while they meet and down while they fail, so a level is measured at most
// once unless its verdict is close: the limit is found in about log2(max/min) + log2(1/precision)
// levels, not the exhaustive grid's.
//
// Thread-safety: a value; not shared.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "search/level_verdict.h"
#include "search/search_spec.h"

namespace servesweep::search {

class LoadLimitSearch {
 public:
  // `start_level` is clamped into [load.min, load.max] (and rounded for concurrency);
  // `first_step` (> 1, at most 2) is the factor of the first step away from it.
  LoadLimitSearch(const SearchSpec& spec, double start_level, double first_step = 2);

  // The level to measure next; nullopt once the limit is found (or no level meets).
  std::optional<double> Next() const;

  // One measurement of Next()'s level: its verdict and the objective's value there.
  void Record(const LevelVerdict& verdict, double objective);

  bool done() const { return !Next().has_value(); }
  // The highest level decided to meet (nullopt: none, not even load.min).
  std::optional<double> limit() const;
  // The lowest level decided to fail above the limit (nullopt: load.max met).
  std::optional<double> lowest_failing() const;
  // The limit's uncertainty: lowest_failing / limit - 1 (0 when load.max met).
  double uncertainty() const;
  // The median objective of the limit's repeats (NaN when no level meets).
  double objective_at_limit() const;
  // The constraint that stopped the load from going higher (the lowest failing level's binding
  // one), "" when load.max met.
  std::string binding() const;

  struct Measurement {
    double level = 0;
    LevelVerdict verdict;
    double objective = 0;
  };
  const std::vector<Measurement>& measurements() const { return measurements_; }

 private:
  struct Decided {
    double level = 0;
    bool meets = false;
    double objective = 0;
    std::string binding;
  };
  double Snap(double level) const;  // into [min, max], whole for concurrency
  void Decide(bool meets, double objective, const std::string& binding);
  std::optional<double> Choose() const;  // the next undecided level, from the decisions

  SearchSpec spec_;
  double step_;  // the bracket's next step factor
  std::vector<Measurement> measurements_;
  std::vector<Measurement> pending_;  // repeats of the level being measured
  std::optional<Decided> best_meeting_, lowest_failing_;
  std::optional<double> next_;
};

}  // namespace servesweep::search
