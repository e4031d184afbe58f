#include "calibration/calibrate.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "perfmodel/calibration.h"
#include "perfmodel/run_deployment.h"

namespace servesweep::calibration {
namespace {

std::vector<std::string> SplitOn(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::stringstream parts(text);
  for (std::string part; std::getline(parts, part, separator);) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

Status LoadPoints(const CalibrateRequest& r, PointSet* set, std::vector<bool>* in_fit) {
  for (const auto& path : r.published) {
    if (Status s = LoadPublishedTable(path, set); !s.ok()) return s;
  }
  for (const auto& db : r.dbs) {
    if (Status s = LoadMeasuredRuns(db, r.db_metrics, r.model_profile, set); !s.ok()) return s;
  }
  set->points.insert(set->points.end(), r.points.begin(), r.points.end());
  if (set->points.empty()) {
    return Status::InvalidArgument(
        "calibrate: expected points (--published TABLE or --db RESULTS.DB), found none");
  }
  if (!r.holdout.empty()) {
    std::vector<bool> held;
    if (Status s = Select(r.holdout, *set, &held); !s.ok()) return s.Prefixed("--holdout");
    for (size_t i = 0; i < held.size(); ++i) set->points[i].held_out = held[i];
  }
  for (CalibrationPoint& p : set->points) {
    for (const auto& name : r.holdout_cases) p.held_out = p.held_out || p.case_name == name;
  }
  in_fit->assign(set->points.size(), true);
  if (!r.fit_only.empty()) {
    if (Status s = Select(r.fit_only, *set, in_fit); !s.ok()) return s.Prefixed("--fit-only");
  }
  return Status::Ok();
}

// "name" or "name:min:max" against the profile's coefficient and its own bounds.
Status ParseFitParameter(const perfmodel::EngineProfile& profile, const std::string& item,
                         perfmodel::FitParameter* out) {
  const std::vector<std::string> parts = SplitOn(item, ':');
  const std::string name = parts.empty() ? item : parts[0];
  double value = 0, low = 0, high = 0;
  if (Status s = perfmodel::GetCoefficient(profile, name, &value); !s.ok()) return s;
  if (Status s = perfmodel::CoefficientBounds(name, &low, &high); !s.ok()) return s;
  if (parts.size() != 1 && parts.size() != 3) {
    return Status::InvalidArgument(fmt::format("expected name or name:min:max, found '{}'", item));
  }
  if (parts.size() == 3) {
    try {
      low = std::max(low, std::stod(parts[1]));
      high = std::min(high, std::stod(parts[2]));
    } catch (const std::exception&) {
      return Status::InvalidArgument(
          fmt::format("expected numbers in name:min:max, found '{}'", item));
    }
    if (!(low < high)) {
      return Status::InvalidArgument(fmt::format("expected min < max in '{}'", item));
    }
  }
  // A coefficient at 0 starts at a small scale: log-scale search needs a positive start.
  low = std::max(low, name.find("_us") != std::string::npos ? 0.01 : 1e-3);
  *out = {name, value > 0 ? value : std::max(low, 1.0), low, high};
  return Status::Ok();
}

// The profile a point is costed with: the fitted one for the points it fits (its engine), else
// the case's override, else the run's own choice (empty options).
record::VirtualRunOptions OptionsFor(const CalibrationPoint& p, const CalibrateRequest& r,
                                     const perfmodel::EngineProfile* candidate) {
  record::VirtualRunOptions options;
  options.default_hardware = r.hardware;
  if (candidate != nullptr) {
    options.engine_profiles.push_back(*candidate);
  } else if (!p.engine_profile.empty()) {
    perfmodel::EngineProfile profile;
    if (perfmodel::LoadEngineProfile(p.engine_profile, &profile).ok()) {
      profile.engine = "any";
      options.engine_profiles.push_back(profile);
    }
  }
  return options;
}

Status Fit(const CalibrateRequest& r, const std::vector<const CalibrationPoint*>& fitted,
           perfmodel::EngineProfile* profile, CalibrationReport* report) {
  std::vector<perfmodel::FitParameter> params;
  for (const auto& item : r.fit) {
    perfmodel::FitParameter param;
    if (Status s = ParseFitParameter(*profile, item, &param); !s.ok()) {
      return s.Prefixed("calibrate --fit");
    }
    params.push_back(param);
  }
  std::vector<double> measured;
  for (const auto* p : fitted) {
    measured.insert(measured.end(), p->measured.begin(), p->measured.end());
  }
  const auto started = std::chrono::steady_clock::now();
  const perfmodel::FitResult fit = perfmodel::FitCoefficients(
      params,
      [&](const std::vector<double>& values) {
        perfmodel::EngineProfile candidate = *profile;
        for (size_t i = 0; i < values.size(); ++i) {
          // Values stay inside the parameters' bounds, which are the coefficient's own.
          perfmodel::SetCoefficient(&candidate, params[i].name, values[i]).IgnoreError();
        }
        std::vector<double> predicted;
        for (const auto* p : fitted) {
          const Prediction pr = Predict(*p, OptionsFor(*p, r, &candidate));
          predicted.insert(predicted.end(), pr.figures.begin(), pr.figures.end());
        }
        const double f = r.loss == FitLoss::kAbsolute
                             ? perfmodel::MeanAbsoluteLogError(predicted, measured)
                             : perfmodel::MeanSquaredLogError(predicted, measured);
        if (std::getenv("SERVESWEEP_CALIBRATE_TRACE")) {
          fmt::print(stderr, "fit {} -> {}\n", fmt::join(values, " "), f);
        }
        return f;
      },
      r.fit_options);
  // Four significant digits: what the data can tell apart, and a profile people can read.
  for (size_t i = 0; i < params.size(); ++i) {
    const double rounded = std::stod(fmt::format("{:.4g}", fit.values[i]));
    perfmodel::SetCoefficient(profile, params[i].name, rounded).IgnoreError();  // in bounds
  }
  report->fit_evaluations = fit.evaluations;
  report->fit_objective = fit.objective;
  report->fit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return Status::Ok();
}

// Per-case medians, the table's bounded median, the fitted and held-out medians, `broken`.
void Summarise(const CalibrateRequest& r, CalibrationReport* report) {
  std::vector<double> fitted_errors, held_errors, bounded_errors;
  std::map<std::string, std::vector<double>> case_errors, case_excluded_errors;
  for (const PointReport& row : report->points) {
    const CalibrationPoint& p = *row.point;
    for (const double e : row.errors) {
      if (p.excluded.empty()) {
        (p.held_out ? held_errors : fitted_errors).push_back(e);
        case_errors[p.case_name].push_back(e);
      } else {
        case_excluded_errors[p.case_name].push_back(e);
      }
    }
  }
  for (const PublishedCase& c : report->set.cases) {
    CaseReport row;
    row.published = &c;
    row.median_abs_error = perfmodel::MedianAbs(case_errors[c.name]);
    row.excluded_median_abs_error = perfmodel::MedianAbs(case_excluded_errors[c.name]);
    row.bounded = c.verified && c.bound_pct > 0;
    row.ok = !row.bounded || row.median_abs_error * 100 <= c.bound_pct;
    if (row.bounded) {
      bounded_errors.insert(bounded_errors.end(), case_errors[c.name].begin(),
                            case_errors[c.name].end());
    }
    report->broken = report->broken || !row.ok;
    report->cases.push_back(row);
  }
  report->bounded_median_abs_error = perfmodel::MedianAbs(bounded_errors);
  report->bounded_figures = bounded_errors.size();
  if (report->set.median_bound_pct > 0 && !bounded_errors.empty()) {
    report->bounded_ok = report->bounded_median_abs_error * 100 <= report->set.median_bound_pct;
    report->broken = report->broken || !report->bounded_ok;
  }
  report->median_abs_error = perfmodel::MedianAbs(fitted_errors);
  report->median_figures = fitted_errors.size();
  report->held_out_median_abs_error = perfmodel::MedianAbs(held_errors);
  report->held_out_figures = held_errors.size();
  if (!held_errors.empty() && r.holdout_bound_pct > 0) {
    report->broken =
        report->broken || report->held_out_median_abs_error * 100 > r.holdout_bound_pct;
  }
}

// What the fitted profile says it was fitted on.
void RecordCalibration(const CalibrateRequest& r, const CalibrationReport& report,
                       perfmodel::EngineProfile* profile) {
  perfmodel::Calibration& c = profile->calibration;
  // A staged fit (a fitted profile fitted again, e.g. --fit-only on MoE points) keeps the
  // earlier stages' commands.
  const std::string earlier = c.fitted ? c.fitted_by + "; then " : "";
  c = {};
  c.fitted = true;
  c.fitted_at = r.fitted_at;
  // The profile by its name, not the path it was read from (a staged fit's is temporary).
  std::string line = r.fitted_by;
  if (const size_t at = line.find(" --engine-profile " + r.engine_profile);
      !r.engine_profile.empty() && at != std::string::npos) {
    line.replace(at, r.engine_profile.size() + 18, " --engine-profile " + profile->name);
  }
  c.fitted_by = earlier + line;
  std::set<std::string> sources;
  std::vector<double> errors;
  for (const PointReport& row : report.points) {
    if (!row.fitted) continue;
    ++c.points;
    if (sources.insert(row.point->source).second) c.sources.push_back(row.point->source);
    perfmodel::ExtendRange(row.prediction.shape, &c.range);
    errors.insert(errors.end(), row.errors.begin(), row.errors.end());
  }
  c.fit_error_pct = std::round(perfmodel::MedianAbs(errors) * 1000) / 10;
  if (!r.fitted_name.empty()) profile->name = r.fitted_name;
}

}  // namespace

bool ProfileFits(const perfmodel::EngineProfile& profile, const CalibrationPoint& p) {
  if (profile.engine == "any") return true;
  return profile.engine == p.Spec().getEngine().cStr() &&
         perfmodel::InVersionRange(profile.versions, p.Spec().getEngineVersion()) &&
         perfmodel::ProfileCoversArchitecture(profile, perfmodel::ModelArchitectureOf(p.Spec()));
}

std::vector<std::string> DefaultFitCoefficients() {
  return {"kernels.weight_read_efficiency",
          "kernels.gemm_efficiency",
          "cpu.step_us",
          "cpu.seq_us",
          "cpu.request_us",
          "collectives.allreduce_us"};
}

std::string PointReport::Note() const {
  if (!prediction.status.ok()) return "failed: " + prediction.status.message();
  if (!point->excluded.empty()) return "excluded: " + point->excluded;
  if (point->held_out) return "held out";
  return "";
}

Status Calibrate(const CalibrateRequest& r, CalibrationReport* report) {
  *report = {};
  std::vector<bool> in_fit;
  if (Status s = LoadPoints(r, &report->set, &in_fit); !s.ok()) return s;
  const std::vector<CalibrationPoint>& points = report->set.points;

  if (r.profile) {
    report->profile = r.profile;
  } else if (!r.engine_profile.empty()) {
    report->profile.emplace();
    if (Status s = perfmodel::LoadEngineProfile(r.engine_profile, &*report->profile); !s.ok()) {
      return s;
    }
  }
  if (!r.fit.empty() && !report->profile) {
    return Status::InvalidArgument(
        "calibrate --fit: expected --engine-profile (the profile whose coefficients to fit), "
        "found none");
  }
  perfmodel::EngineProfile* profile = report->profile ? &*report->profile : nullptr;
  if (!r.fit.empty()) {
    std::vector<const CalibrationPoint*> fitted;
    for (size_t i = 0; i < points.size(); ++i) {
      const CalibrationPoint& p = points[i];
      if (ProfileFits(*profile, p) && p.excluded.empty() && !p.held_out && in_fit[i]) {
        fitted.push_back(&p);
      }
    }
    if (fitted.empty()) {
      return Status::InvalidArgument(fmt::format(
          "calibrate: no point to fit {} to (its engine is {}, its versions {}-{}, its models "
          "{}; held-out and excluded points are not fitted)",
          profile->name, profile->engine, profile->versions.from, profile->versions.before,
          profile->architecture));
    }
    if (Status s = Fit(r, fitted, profile, report); !s.ok()) return s;
    report->fitted = true;
  }

  // Every point, predicted with the (fitted) profile where it applies.
  for (const CalibrationPoint& p : points) {
    PointReport row;
    row.point = &p;
    const bool mine = profile != nullptr && ProfileFits(*profile, p);
    row.prediction = Predict(p, OptionsFor(p, r, mine ? profile : nullptr));
    row.fitted = report->fitted && mine && p.excluded.empty() && !p.held_out;
    for (size_t m = 0; m < p.metrics.size(); ++m) {
      row.errors.push_back(perfmodel::RelativeError(row.prediction.figures[m], p.measured[m]));
    }
    report->points.push_back(std::move(row));
  }
  Summarise(r, report);
  if (report->fitted) RecordCalibration(r, *report, profile);
  return Status::Ok();
}

}  // namespace servesweep::calibration
