// Calibration as one call: load the points (published tables, results databases), fit an engine
// profile's coefficients to the points of its engine (optional), predict every point with the
// profile that applies, and report each figure's error, each case's median against its bound,
// the table's median bound and the held-out median. `servesweep calibrate` renders the report
// (text or JSON) and writes the fitted profile; the fidelity suite checks its `broken`.
//
// Errors are predicted / measured - 1. A point is fitted when its engine is the profile's (at a
// version in the profile's range), it is not excluded, not held out and selected by fit_only.
// The fitted profile's calibration says what it was fitted on: the fitted points, their sources,
// the range of their shapes, the median |error| over their figures.
//
// Thread-safety: one call, one thread (the fit evaluates the model serially).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "calibration/calibration_points.h"
#include "common/status.h"
#include "perfmodel/calibration.h"
#include "perfmodel/engine_profile.h"

namespace servesweep::calibration {

enum class FitLoss {
  kSquared,   // mean log error squared
  kAbsolute,  // mean |log error|: one noisy figure pulls the fit less
};

// What a fit moves when it names nothing: the coefficients every engine has and the points
// constrain (weight streaming, GEMM efficiency, CPU per step and per request in the batch, the
// front end, the all-reduce floor).
std::vector<std::string> DefaultFitCoefficients();

struct CalibrateRequest {
  std::vector<std::string> published;    // tables (tests/fidelity/published.yaml)
  std::vector<std::string> dbs;          // results databases of real runs
  std::vector<CalibrationPoint> points;  // points given directly (a search's counted runs)
  std::vector<std::string> db_metrics = {"ttft_median_ms", "tpot_median_ms", "e2el_median_ms",
                                         "output_throughput"};
  std::string engine_profile;  // a shipped name or a YAML path; "" = each point's own profile
  std::optional<perfmodel::EngineProfile> profile;  // given directly: instead of engine_profile
  // Coefficients to fit, each "name" or "name:min:max" (bounds narrower than the coefficient's
  // own); empty: evaluate only. Needs engine_profile.
  std::vector<std::string> fit;
  std::string holdout;                     // a selector (Select): predicted, never fitted
  std::vector<std::string> holdout_cases;  // cases (CalibrationPoint::case_name) held out too
  std::string fit_only;                    // a selector: the only points fitted
  std::string hardware;                    // for db runs and specs naming none
  std::string model_profile;               // for db runs whose served name names none
  perfmodel::FitOptions fit_options = {.max_evaluations = 300};
  FitLoss loss = FitLoss::kSquared;
  double holdout_bound_pct = 0;  // > 0: the held-out median |error| must be at most this
  std::string fitted_by;         // the command line the fitted profile records
  std::string fitted_at;         // its date (YYYY-MM-DD)
  std::string fitted_name;       // the fitted profile's new name ("" = keep)
};

struct PointReport {
  const CalibrationPoint* point = nullptr;  // in CalibrationReport::set
  Prediction prediction;
  std::vector<double> errors;  // one per metric; NaN where the prediction or figure is missing
  bool fitted = false;         // part of the fit
  // "failed: why", "excluded: why", "held out", or "".
  std::string Note() const;
};

struct CaseReport {
  const PublishedCase* published = nullptr;  // in CalibrationReport::set
  double median_abs_error = 0;               // over its points not excluded; NaN when none
  double excluded_median_abs_error = 0;      // over its excluded points; NaN when none
  bool bounded = false;                      // verified with a bound
  bool ok = true;                            // unbounded, or within its bound
};

// Move-only: its rows point into its own set.
struct CalibrationReport {
  CalibrationReport() = default;
  CalibrationReport(CalibrationReport&&) = default;
  CalibrationReport& operator=(CalibrationReport&&) = default;
  CalibrationReport(const CalibrationReport&) = delete;
  CalibrationReport& operator=(const CalibrationReport&) = delete;

  PointSet set;
  std::vector<PointReport> points;
  std::vector<CaseReport> cases;
  // Over the figures of bounded cases, against the table's median bound (0: none).
  double bounded_median_abs_error = 0;  // NaN when no case is bounded
  size_t bounded_figures = 0;
  bool bounded_ok = true;
  double median_abs_error = 0;  // over figures not held out or excluded (NaN when none)
  size_t median_figures = 0;
  double held_out_median_abs_error = 0;  // NaN when nothing is held out
  size_t held_out_figures = 0;
  bool broken = false;  // a case's bound, the table's, or the held-out bound is broken
  // The fit, when one ran.
  int fit_evaluations = 0;
  double fit_objective = 0;
  double fit_seconds = 0;
  // The profile that predicted its engine's points (fitted, with its calibration, when a fit
  // ran); absent without engine_profile.
  std::optional<perfmodel::EngineProfile> profile;
  bool fitted = false;
};

// Whether a point is the profile's to fit: its engine (or any, for an "any" profile), at a
// version in the profile's range, of a model kind the profile is for (dense, MoE or any).
bool ProfileFits(const perfmodel::EngineProfile& profile, const CalibrationPoint& point);

// Loads, fits (when asked) and evaluates. Failures are the inputs': a table or database that
// cannot be read, a selector or coefficient that is wrong, nothing to fit (InvalidArgument,
// NotFound); a point whose virtual run fails is reported in its row, not a failure.
Status Calibrate(const CalibrateRequest& request, CalibrationReport* report);

}  // namespace servesweep::calibration
