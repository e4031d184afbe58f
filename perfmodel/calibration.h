// Fitting an engine profile's coefficients to measured figures (`servesweep calibrate`): the
// error measure, a derivative-free minimiser, and what a fit was made on. The caller supplies
// the predictions (a virtual run per point), so this file knows no run spec and no database.
//
//   std::vector<FitParameter> params = {{"cpu.step_us", 300, 1, 20000}, ...};
//   FitResult fit = FitCoefficients(params, [&](const std::vector<double>& v) {
//     return MeanSquaredLogError(predicted_for(v), measured);
//   }, {.max_evaluations = 300});
//
// Errors: a figure's error is predicted / measured - 1 (as a percentage when printed); the fit
// minimises the mean squared log(predicted / measured), which treats 2x too slow and 2x too fast
// alike and keeps a large figure from outweighing a small one.
//
// Thread-safety: pure functions; the objective is called on the calling thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "perfmodel/engine_profile.h"

namespace servesweep::perfmodel {

struct FitParameter {
  std::string name;  // an engine coefficient (CoefficientNames)
  double initial = 1;
  double min_value = 0;  // > 0: the fit moves on a log scale
  double max_value = 1;
};

struct FitOptions {
  int max_evaluations = 400;
  double initial_step = 0.5;  // of log(value): the first simplex spans x e^0.5
  double tolerance = 1e-4;    // stop when the simplex's objective spread is below this
  int scan_sweeps = 2;        // coordinate scans before the simplex (0: none)
  int scan_points = 6;        // per side of each scan: 2 x this + 1 values over the span
  double scan_span = 3;       // of log(value): scans reach x e^-3 .. x e^3 (x 1/20 .. x 20)
};

struct FitResult {
  std::vector<double> values;  // one per parameter, within its bounds
  double objective = 0;
  int evaluations = 0;
};

using FitObjective = std::function<double(const std::vector<double>& values)>;

// Coordinate scans, then Nelder-Mead with restarts, on log(values) within the bounds;
// deterministic.
FitResult FitCoefficients(const std::vector<FitParameter>& parameters,
                          const FitObjective& objective, const FitOptions& options = {});

// Mean of log(predicted / measured)^2 over pairs with both > 0; a pair whose prediction is not
// positive (no figure) counts as a factor-of-10 miss.
double MeanSquaredLogError(const std::vector<double>& predicted,
                           const std::vector<double>& measured);
// The same with |log(predicted / measured)|: one noisy figure pulls the fit less (measurements
// on a shared machine).
double MeanAbsoluteLogError(const std::vector<double>& predicted,
                            const std::vector<double>& measured);

// predicted / measured - 1; NaN when either is not positive.
double RelativeError(double predicted, double measured);

// Median of the absolute values (NaN ignored); NaN when none.
double MedianAbs(std::vector<double> values);

// Whether a run lies inside what a calibration was fitted on; *why lists what is outside
// ("model llama-3.1-8b not fitted (fitted: llama-3.1-70b)", "load 128 above 64").
struct RunShape {
  std::string model, hardware, layout;
  double input_tok = 0, output_tok = 0, load = 0;
};
bool InCalibratedRange(const Calibration& calibration, const RunShape& run, std::string* why);

// How far a run lies from what a calibration was fitted on, nearest first; a run is of the
// farthest kind it qualifies for. The kinds a cross-validated band is measured per
// (calibration/cross_validate.h): the error to expect grows with the distance.
enum class ExtrapolationKind {
  kInRange,            // model, hardware and layout fitted; lengths and load in range
  kOtherShape,         // fitted model and hardware; another layout, lengths or load
  kOtherModel,         // a model not fitted, of an architecture kind that was
  kOtherArchitecture,  // no fitted model of its architecture kind (dense/MoE x attention)
  kOtherHardware,      // hardware not fitted
  kOtherVersion,       // the profile was fitted on other versions of the engine
  kUncalibrated,       // the profile was not fitted at all
};
inline constexpr int kExtrapolationKinds = 7;

// "in range", "other shape", "other model", "other architecture", "other hardware",
// "other version", "uncalibrated".
const char* ExtrapolationKindName(ExtrapolationKind kind);

// The kind of `run` against `calibration` (never kOtherVersion: the caller knows whether the
// profile's versions hold the run's). A model's architecture kind is read from its model
// profile ("moe mla", "dense gqa"); a model without a profile is its own kind.
ExtrapolationKind ClassifyRun(const Calibration& calibration, const RunShape& run);

// A layout as calibrations name it: "tp4", "tp2 pp2", "tp8 dp8 dp-attention ep8", "1p+3d tp2".
std::string LayoutName(int tp, int pp, int dp, int ep, bool dp_attention, int prefill_instances,
                       int decode_instances);

// Extends a range to hold a run.
void ExtendRange(const RunShape& run, CalibrationRange* range);

}  // namespace servesweep::perfmodel
