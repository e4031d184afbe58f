#include "calibration/cross_validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "common/percentile.h"

namespace servesweep::calibration {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The cases a fit of `profile` uses, in table order: those with a point it fits, not excluded,
// selected by fit_only.
std::vector<std::string> FittedCases(const CalibrateRequest& r, const CalibrationReport& base,
                                     Status* status) {
  std::vector<bool> selected(base.set.points.size(), true);
  if (!r.fit_only.empty()) {
    *status = Select(r.fit_only, base.set, &selected);
    if (!status->ok()) return {};
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < base.set.points.size(); ++i) {
    const CalibrationPoint& p = base.set.points[i];
    if (selected[i] && p.excluded.empty() && !p.held_out && ProfileFits(*base.profile, p) &&
        std::find(out.begin(), out.end(), p.case_name) == out.end()) {
      out.push_back(p.case_name);
    }
  }
  return out;
}

// The held-out figures of `name` (its points the profile fits) from a report that held it out.
void CollectCase(const std::string& name, const CalibrationReport& report, bool refitted,
                 CrossValidation* out) {
  HeldOutCase row{name, report.profile->name, 0, kNaN, refitted, refitted ? report.fit_evaluations : 0,
                  ""};
  std::vector<double> errors;
  for (const PointReport& p : report.points) {
    // Only the profile's points were held out; the case's others (another engine's) were
    // predicted by profiles that may have been fitted on them.
    if (p.point->case_name != name || !p.point->excluded.empty() ||
        !ProfileFits(*report.profile, *p.point)) {
      continue;
    }
    std::string outside;
    perfmodel::ExtrapolationKind kind = perfmodel::ExtrapolationKind::kUncalibrated;
    if (refitted && p.prediction.status.ok()) {
      kind = perfmodel::ClassifyRun(report.profile->calibration, p.prediction.shape);
      perfmodel::InCalibratedRange(report.profile->calibration, p.prediction.shape, &outside);
    }
    for (size_t m = 0; m < p.errors.size(); ++m) {
      out->figures.push_back({name, p.point->id, p.point->metrics[m], p.point->measured[m],
                              p.prediction.figures[m], p.errors[m], kind, outside});
      errors.push_back(p.errors[m]);
    }
  }
  row.figures = errors.size();
  row.median_abs_error = perfmodel::MedianAbs(errors);
  out->cases.push_back(row);
}

// Appends one profile's held-out cases and figures.
Status CrossValidateProfile(const CalibrateRequest& request, CrossValidation* out) {
  if (request.engine_profile.empty() || request.fit.empty()) {
    return Status::InvalidArgument(
        "calibrate --cross-validate: expected --engine-profile and --fit (the fit to repeat "
        "without each case), found " +
        std::string(request.engine_profile.empty() ? "no --engine-profile" : "no --fit"));
  }
  CalibrateRequest evaluate = request;
  evaluate.fit.clear();
  CalibrationReport base;
  if (Status s = Calibrate(evaluate, &base); !s.ok()) return s;
  Status selected = Status::Ok();
  const std::vector<std::string> cases = FittedCases(request, base, &selected);
  if (!selected.ok()) return selected.Prefixed("--fit-only");
  if (cases.empty()) {
    return Status::InvalidArgument(
        fmt::format("calibrate --cross-validate: expected cases with points {} fits, found none",
                    base.profile->name));
  }
  for (const std::string& name : cases) {
    CalibrateRequest held = request;
    held.holdout_cases.push_back(name);
    const bool refit = cases.size() > 1;
    if (!refit && base.profile->calibration.fitted) {
      out->cases.push_back(
          {name, base.profile->name, 0, kNaN, false, 0,
           fmt::format("no other case to fit {} on, and its coefficients were fitted (on this "
                       "case, perhaps): a prediction would be in-sample",
                       base.profile->name)});
      continue;
    }
    if (!refit) held.fit.clear();
    CalibrationReport report;
    if (Status s = Calibrate(held, &report); !s.ok()) return s.Prefixed("holding out " + name);
    out->fits += refit ? 1 : 0;
    out->fit_seconds += report.fit_seconds;
    CollectCase(name, report, refit, out);
  }
  return Status::Ok();
}

}  // namespace

ErrorBand BandOf(const std::vector<double>& errors, const std::vector<std::string>& cases) {
  ErrorBand band;
  std::vector<double> sorted;
  std::set<std::string> distinct;
  for (size_t i = 0; i < errors.size(); ++i) {
    if (std::isnan(errors[i])) continue;
    sorted.push_back(errors[i]);
    distinct.insert(cases[i]);
  }
  band.figures = sorted.size();
  band.cases = distinct.size();
  if (sorted.empty()) {
    band.low = band.high = band.median_abs = kNaN;
    return band;
  }
  std::sort(sorted.begin(), sorted.end());
  band.low = PercentileOfSorted(sorted, kBandLowPercentile);
  band.high = PercentileOfSorted(sorted, kBandHighPercentile);
  band.median_abs = perfmodel::MedianAbs(sorted);
  return band;
}

void SummariseHeldOut(CrossValidation* out) {
  std::vector<double> all, widths;
  size_t inside = 0;
  for (int k = 0; k < perfmodel::kExtrapolationKinds; ++k) {
    std::vector<double> errors;
    std::vector<std::string> cases;
    for (const HeldOutFigure& f : out->figures) {
      if (static_cast<int>(f.kind) != k) continue;
      errors.push_back(f.error);
      cases.push_back(f.case_name);
    }
    out->bands[k] = BandOf(errors, cases);
    for (size_t i = 0; i < errors.size(); ++i) {
      if (std::isnan(errors[i])) continue;
      std::vector<double> others_errors;
      std::vector<std::string> others_cases;
      for (size_t j = 0; j < errors.size(); ++j) {
        if (cases[j] == cases[i]) continue;
        others_errors.push_back(errors[j]);
        others_cases.push_back(cases[j]);
      }
      const ErrorBand band = BandOf(others_errors, others_cases);
      if (!band.known()) continue;
      ++out->judged_figures;
      inside += band.low <= errors[i] && errors[i] <= band.high ? 1 : 0;
      widths.push_back(band.high - band.low);
    }
  }
  for (const HeldOutFigure& f : out->figures) all.push_back(f.error);
  out->median_abs_error = perfmodel::MedianAbs(all);
  out->coverage = out->judged_figures > 0
                      ? static_cast<double>(inside) / static_cast<double>(out->judged_figures)
                      : kNaN;
  out->median_band_width = perfmodel::MedianAbs(widths);
}

Status CrossValidate(const CalibrateRequest& request, CrossValidation* out) {
  return CrossValidate(std::vector<CalibrateRequest>{request}, out);
}

Status CrossValidate(const std::vector<CalibrateRequest>& requests, CrossValidation* out) {
  *out = {};
  for (const CalibrateRequest& r : requests) {
    if (Status s = CrossValidateProfile(r, out); !s.ok()) return s;
  }
  SummariseHeldOut(out);
  return Status::Ok();
}

}  // namespace servesweep::calibration
