// `servesweep search`'s decisions (docs/search.md), apart from how a level is measured: which
// configurations the model says are worth running, in which order, which load level of each to
// measure next, when one is pruned, what the budget allows, and the answer. The caller measures:
// the model through PredictLevel (a virtual run), reality through MeasureRound (real runs through
// the coordinator and agents, one round at a time; or, in unit tests, another model).
//
// With SearchSettings::learn_band (`--learn-band`), the model's error on every counted run becomes
// the band that bounds what has not started yet. With SearchSettings::relearn (`--learn`), the
// model is fitted again on the counted runs after every round that counted one; what has not
// started is predicted again and re-ranked, and bounded by the fitted models' own errors on runs
// they had not seen (each run is predicted before it runs, by the model of the rounds before).
//
// A round measures one level of each of up to `width` configurations at once (they run side by
// side on the agents). Configurations are taken best predicted first; before each round, a
// configuration not started yet is pruned when its optimistic bound (prediction_bounds.h) cannot
// beat the leader's measured objective. Only certified runs count: a level whose run was not
// (invalid, client-bound, failed) is measured again, up to max_uncounted times in a row, then the
// configuration is reported failed with the reason; a permanent error is not tried again.
//
// Thread-safety: RunSearch calls its callbacks on the calling thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "perfmodel/error_bands.h"
#include "search/level_verdict.h"
#include "search/load_limit.h"
#include "search/search_spec.h"

namespace servesweep::search {

// The model's answer for one configuration, before anything is run.
struct Prediction {
  std::string error;       // the model could not predict it ("" if it could): never pruned
  double limit = 0;        // the highest level meeting every constraint (0: none)
  double objective = 0;    // the objective there (NaN: none)
  double optimistic = 0;   // the objective at the limit of the band's best end (NaN: none)
  double pessimistic = 0;  // ... of its worst end
  perfmodel::KindBand band;
  std::string band_kind;  // "in range", "other hardware", ... (perfmodel/calibration.h)
};

// The model's figures of `configuration` at `level`.
using PredictLevel = std::function<Status(size_t configuration, double level, Figures* out)>;

// Searches the model's figures three times: as predicted, and at either end of `band`.
Prediction Predict(const SearchSpec& spec, size_t configuration, const perfmodel::KindBand& band,
                   const std::string& band_kind, const PredictLevel& predict);

struct LevelRequest {
  size_t configuration = 0;
  double level = 0;
};

struct LevelOutcome {
  Figures figures;          // the run's record columns (certified runs)
  std::string not_counted;  // why the run does not count ("" if it does)
  bool permanent = false;   // the reason will not go away by measuring again
  double gpu_s = 0;         // GPU-seconds it held (attempt time x GPUs)
  std::string run_id;
};

// Measures every request of round `round` (1, 2, ...): `out` in the requests' order.
using MeasureRound = std::function<Status(int round, const std::vector<LevelRequest>& requests,
                                          std::vector<LevelOutcome>* out)>;

enum class ConfigurationStatus {
  kNotReached,  // never started: the budget ran out first
  kFound,       // its limit was found
  kNoneMeets,   // not even load.min meets the constraints
  kPruned,      // the model's optimistic bound cannot beat the leader
  kFailed,      // its runs could not be counted (why)
};
const char* ConfigurationStatusName(ConfigurationStatus status);

struct ConfigurationResult {
  Prediction prediction;
  ConfigurationStatus status = ConfigurationStatus::kNotReached;
  std::string why;  // pruned: the bounds compared; failed: the reason; over budget
  std::optional<double> limit, lowest_failing;
  double uncertainty = 0;  // lowest_failing / limit - 1
  double objective = 0;    // measured at the limit (NaN: none)
  std::string binding;     // the constraint that stopped the load
  int runs = 0;            // real runs, counted or not
  double gpu_s = 0;
};

// One real run of the search, in order.
struct SearchStep {
  int round = 0;
  size_t configuration = 0;
  double level = 0;
  std::string run_id;
  std::string not_counted;  // "" when counted
  bool meets = false;
  std::string binding;
  double objective = 0;            // measured
  double predicted_objective = 0;  // the model's at this level before it ran (NaN: none)
  int model_generation = 0;        // which model predicted it (0: the one the search began with)
  Figures figures;                 // the run's (counted runs)
};

// The model fitted again (`--learn`), after round `round`, on `runs` counted runs.
struct ModelUpdate {
  int round = 0;
  size_t runs = 0;
  int generation = 0;  // 1, 2, ...: the model's number from now on
  std::string note;    // what was fitted, and the fit's own error (never a band)
};

struct SearchResult {
  std::vector<ConfigurationResult> configurations;  // in the caller's order
  std::optional<size_t> winner;
  std::vector<SearchStep> steps;
  int rounds = 0;
  double gpu_s = 0;
  std::string stopped_by;  // "" when every configuration was decided; else the budget spent
  std::vector<ModelUpdate> model_updates;
};

// Fits the model to the counted runs so far (`counted`: every counted step, in order). Returns
// whether the model changed: PredictLevel answers with the new one from then on. `note` says
// what was fitted.
using Relearn = std::function<bool(const std::vector<SearchStep>& counted, std::string* note)>;

struct SearchSettings {
  size_t width = 1;       // configurations measured side by side per round
  int max_uncounted = 2;  // runs of one level in a row that may not count
  // Learn the model's band from the search's own runs: once kMinBandCases configurations have
  // counted runs, a configuration not started yet is bounded by the errors they showed
  // (ObservedBand) instead of its shipped band, known or not.
  // Off by default: on bench/search.sh's space the errors of other layouts widened the band
  // (59% of the exhaustive GPU-seconds against 40% without it).
  bool learn_band = false;
  // Seconds since the search started (the wall-time budget); none: the budget's wall_s unused.
  std::function<double()> elapsed_s;
  // Fit the model again after every round that counted a run (none: the model stays). Once
  // kMinBandCases configurations have runs a fitted model predicted, what has not started is
  // bounded by those errors only (the first model's misses say nothing of the fitted one's).
  Relearn relearn;
};

SearchResult RunSearch(const SearchSpec& spec, const std::vector<Prediction>& predictions,
                       const SearchSettings& settings, const PredictLevel& predict,
                       const MeasureRound& measure);

}  // namespace servesweep::search
