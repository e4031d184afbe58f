// Leave-one-case-out cross-validation of a calibration (`servesweep calibrate --cross-validate`):
// the error a user gets is the error on figures the fit did not see, never the fit's own.
//
// For every case with a point the profile fits (a published case, or one results database),
// the fit runs again without that case and predicts it. Each held-out figure is sorted by how
// far it lies from what that fit was fitted on (perfmodel::ExtrapolationKind); a kind's band is
// the interval that held 80% of its figures (the 10th to the 90th percentile of predicted /
// measured - 1, asymmetric where the model leans one way), and it is unknown, not a small
// number, while fewer than kMinBandCases cases give figures of that kind.
//
// Coverage is measured as a user meets it: a case's figures are judged against the bands of
// the other cases' figures (the band never saw the case it is judged on).
//
// What it does not hide: a case that leaves nothing else to fit is predicted by the start
// profile's coefficients and counted as uncalibrated when that profile was never fitted; when it
// was (perhaps on this very case) the case is listed as not cross-validated, without figures.
// Coefficients outside `fit` keep the start profile's values, which may have been fitted on the
// case before (start from an unfitted profile for a clean measure).
//
// Thread-safety: one call, one thread (each fit evaluates the model serially).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "calibration/calibrate.h"
#include "common/status.h"
#include "perfmodel/calibration.h"
#include "perfmodel/error_bands.h"

namespace servesweep::calibration {

using perfmodel::kMinBandCases;  // a band is known from this many cases of its kind
inline constexpr double kBandLowPercentile = 10;
inline constexpr double kBandHighPercentile = 90;

struct HeldOutFigure {
  std::string case_name, point_id, metric;
  double measured = 0, predicted = 0;
  double error = 0;  // predicted / measured - 1; NaN when the prediction failed
  perfmodel::ExtrapolationKind kind = perfmodel::ExtrapolationKind::kInRange;
  std::string outside;  // what lies outside the fit (InCalibratedRange's reasons)
};

struct ErrorBand {
  size_t figures = 0, cases = 0;
  double low = 0, high = 0;  // the 10th and 90th percentile errors; NaN when no figure
  double median_abs = 0;     // NaN when no figure
  bool known() const { return cases >= kMinBandCases; }
};

struct HeldOutCase {
  std::string name;
  std::string profile;  // the engine profile whose fit held it out
  size_t figures = 0;
  double median_abs_error = 0;  // NaN when no figure could be predicted
  bool refitted = true;         // false: nothing else to fit, the start profile predicted it
  int evaluations = 0;          // the refit's model evaluations (0 when not refitted)
  // Why the case gave no held-out figure: nothing else to fit and a start profile that was
  // fitted (on this case, perhaps): its prediction would be in-sample. "" when it gave them.
  std::string not_cross_validated;
};

struct CrossValidation {
  std::vector<HeldOutFigure> figures;
  std::vector<HeldOutCase> cases;
  std::array<ErrorBand, perfmodel::kExtrapolationKinds> bands;  // by ExtrapolationKind
  double median_abs_error = 0;  // over every held-out figure (NaN when none)
  // Figures whose kind had a known band without their own case, and of those the fraction
  // inside it; the median width (high - low) of those bands.
  size_t judged_figures = 0;
  double coverage = 0;
  double median_band_width = 0;
  int fits = 0;
  double fit_seconds = 0;
};

// The band of `errors` (one per figure, with its case): NaN errors are skipped.
ErrorBand BandOf(const std::vector<double>& errors, const std::vector<std::string>& cases);

// Fills out's bands, median and coverage from out->figures (their errors, kinds and cases).
void SummariseHeldOut(CrossValidation* out);

// Needs request.engine_profile and request.fit; request.holdout_cases is the procedure's own.
// Errors are Calibrate's (inputs that cannot be read, nothing to hold out).
Status CrossValidate(const CalibrateRequest& request, CrossValidation* out);

// Several profiles' fits (one request each: its profile, fit and fit_only) cross-validated and
// pooled: the bands and coverage are over every held-out figure. A published case held out by
// two profiles (its vLLM and its SGLang points) counts as one case in the bands: its halves
// share a source and conditions.
Status CrossValidate(const std::vector<CalibrateRequest>& requests, CrossValidation* out);

}  // namespace servesweep::calibration
