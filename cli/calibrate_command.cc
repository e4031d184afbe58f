// `servesweep calibrate`: fits an engine profile's coefficients to measured runs (results
// databases) and published points (a YAML table of conditions and figures with their sources),
// minimising the log error over their figures (TTFT, TPOT/ITL, E2E, throughput; squared, or
// absolute with --loss absolute), prints every figure's error and the medians, and writes the
// profile with what it was fitted on. Without --fit it only evaluates (the shipped profiles, or
// --engine-profile) and, with --check, fails when a case's bound is broken: the fidelity suite
// (tests/fidelity) runs it so.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/calibration_points.h"
#include "cli/commands.h"
#include "perfmodel/calibration.h"
#include "perfmodel/engine_profile.h"

namespace servesweep::cli {
namespace {

// What a fit moves when --fit names nothing: the coefficients every engine has and the points
// constrain (weight streaming, GEMM efficiency, CPU per step and per request in the batch, the
// front end, the all-reduce floor).
const char* const kDefaultFit[] = {"kernels.weight_read_efficiency",
                                   "kernels.gemm_efficiency",
                                   "cpu.step_us",
                                   "cpu.seq_us",
                                   "cpu.request_us",
                                   "collectives.allreduce_us"};

struct CalibrateOptions {
  std::vector<std::string> published;
  std::vector<std::string> dbs;
  std::string metrics = "ttft_median_ms,tpot_median_ms,e2el_median_ms,output_throughput";
  std::string engine_profile;
  std::string fit;
  bool fit_default = false;
  std::string holdout;
  std::string fit_only;
  std::string hardware;
  std::string model_profile;
  std::string out;
  std::string name;
  int max_evaluations = 300;
  std::string loss = "squared";
  double holdout_bound_pct = 0;
  bool check = false;
  bool json = false;
  std::string command_line;
};

std::vector<std::string> SplitOn(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::stringstream parts(text);
  for (std::string part; std::getline(parts, part, separator);) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::vector<std::string> Split(const std::string& text) { return SplitOn(text, ','); }

std::string Today() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof(text), "%Y-%m-%d", &utc);
  return text;
}

// The profile a point is costed with: the fitted one for the points it fits (its engine), else
// the case's override, else the run's own choice (empty options).
record::VirtualRunOptions OptionsFor(const CalibrationPoint& p, const CalibrateOptions& o,
                                     const perfmodel::EngineProfile* candidate) {
  record::VirtualRunOptions options;
  options.default_hardware = o.hardware;
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

// Whether a point is the profile's to fit: its engine, at a version in the profile's range.
bool Fits(const perfmodel::EngineProfile& profile, const CalibrationPoint& p) {
  if (profile.engine == "any") return true;
  return profile.engine == p.Spec().getEngine().cStr() &&
         perfmodel::InVersionRange(profile.versions, p.Spec().getEngineVersion());
}

struct Row {
  const CalibrationPoint* point;
  Prediction prediction;
  bool fitted;  // part of the fit (its engine's profile was the one fitted)
};

std::vector<double> Errors(const Row& r) {
  std::vector<double> e;
  for (size_t m = 0; m < r.point->metrics.size(); ++m) {
    e.push_back(perfmodel::RelativeError(r.prediction.figures[m], r.point->measured[m]));
  }
  return e;
}

std::string Pct(double v) { return std::isnan(v) ? "n/a" : fmt::format("{:+.1f}%", v * 100); }

int Run(const CalibrateOptions& o) {
  PointSet set;
  for (const auto& path : o.published) {
    if (Status s = LoadPublishedTable(path, &set); !s.ok()) {
      spdlog::error("{}", s.message());
      return kExitError;
    }
  }
  for (const auto& db : o.dbs) {
    if (Status s = LoadMeasuredRuns(db, Split(o.metrics), o.model_profile, &set); !s.ok()) {
      spdlog::error("{}", s.message());
      return kExitError;
    }
  }
  if (set.points.empty()) {
    spdlog::error("calibrate: expected points (--published TABLE or --db RESULTS.DB), found none");
    return kExitError;
  }
  if (!o.holdout.empty()) {
    std::vector<bool> held;
    if (Status s = Select(o.holdout, set, &held); !s.ok()) {
      spdlog::error("--holdout: {}", s.message());
      return kExitError;
    }
    for (size_t i = 0; i < held.size(); ++i) set.points[i].held_out = held[i];
  }
  std::vector<bool> in_fit(set.points.size(), true);
  if (!o.fit_only.empty()) {
    if (Status s = Select(o.fit_only, set, &in_fit); !s.ok()) {
      spdlog::error("--fit-only: {}", s.message());
      return kExitError;
    }
  }

  // The profile to fit (or to evaluate every point with).
  std::unique_ptr<perfmodel::EngineProfile> profile;
  if (!o.engine_profile.empty()) {
    profile = std::make_unique<perfmodel::EngineProfile>();
    if (Status s = perfmodel::LoadEngineProfile(o.engine_profile, profile.get()); !s.ok()) {
      spdlog::error("{}", s.message());
      return kExitError;
    }
  }
  std::vector<std::string> fit_names = Split(o.fit);
  if (o.fit_default) fit_names.assign(std::begin(kDefaultFit), std::end(kDefaultFit));
  if (!fit_names.empty() && !profile) {
    spdlog::error(
        "calibrate --fit: expected --engine-profile (the profile whose coefficients "
        "to fit), found none");
    return kExitError;
  }
  std::vector<const CalibrationPoint*> fitted;
  for (size_t i = 0; i < set.points.size(); ++i) {
    const CalibrationPoint& p = set.points[i];
    if (profile && Fits(*profile, p) && p.excluded.empty() && !p.held_out && in_fit[i]) {
      fitted.push_back(&p);
    }
  }
  if (!fit_names.empty() && fitted.empty()) {
    spdlog::error(
        "calibrate: no point to fit {} to (its engine is {}; held-out and excluded "
        "points are not fitted)",
        profile->name, profile->engine);
    return kExitError;
  }

  if (!fit_names.empty()) {
    std::vector<perfmodel::FitParameter> params;
    for (const auto& item : fit_names) {
      // name[:min:max]: the coefficient's own bounds, or narrower physical ones.
      const std::vector<std::string> parts = SplitOn(item, ':');
      const std::string& name = parts[0];
      double value = 0, low = 0, high = 0;
      Status s = perfmodel::GetCoefficient(*profile, name, &value);
      if (s.ok()) s = perfmodel::CoefficientBounds(name, &low, &high);
      if (s.ok() && parts.size() != 1 && parts.size() != 3) {
        s = Status::InvalidArgument(fmt::format("expected name or name:min:max, found '{}'", item));
      }
      if (s.ok() && parts.size() == 3) {
        try {
          low = std::max(low, std::stod(parts[1]));
          high = std::min(high, std::stod(parts[2]));
        } catch (const std::exception&) {
          s = Status::InvalidArgument(
              fmt::format("expected numbers in name:min:max, found '{}'", item));
        }
        if (s.ok() && !(low < high)) {
          s = Status::InvalidArgument(fmt::format("expected min < max in '{}'", item));
        }
      }
      if (!s.ok()) {
        spdlog::error("calibrate --fit: {}", s.message());
        return kExitError;
      }
      // A coefficient at 0 starts at a small scale: log-scale search needs a positive start.
      low = std::max(low, name.find("_us") != std::string::npos ? 0.01 : 1e-3);
      params.push_back({name, value > 0 ? value : std::max(low, 1.0), low, high});
    }
    std::vector<double> measured;
    for (const auto* p : fitted)
      measured.insert(measured.end(), p->measured.begin(), p->measured.end());
    const auto started = std::chrono::steady_clock::now();
    const perfmodel::FitResult fit = perfmodel::FitCoefficients(
        params,
        [&](const std::vector<double>& values) {
          perfmodel::EngineProfile candidate = *profile;
          for (size_t i = 0; i < values.size(); ++i) {
            (void)perfmodel::SetCoefficient(&candidate, params[i].name, values[i]);
          }
          std::vector<double> predicted;
          for (const auto* p : fitted) {
            const Prediction pr = Predict(*p, OptionsFor(*p, o, &candidate));
            predicted.insert(predicted.end(), pr.figures.begin(), pr.figures.end());
          }
          const double f = o.loss == "absolute"
                               ? perfmodel::MeanAbsoluteLogError(predicted, measured)
                               : perfmodel::MeanSquaredLogError(predicted, measured);
          if (std::getenv("SERVESWEEP_CALIBRATE_TRACE"))
            fmt::print(stderr, "fit {} -> {}\n", fmt::join(values, " "), f);
          return f;
        },
        {.max_evaluations = o.max_evaluations});
    // Four significant digits: what the data can tell apart, and a profile people can read.
    for (size_t i = 0; i < params.size(); ++i) {
      const double rounded = std::stod(fmt::format("{:.4g}", fit.values[i]));
      (void)perfmodel::SetCoefficient(profile.get(), params[i].name, rounded);
    }
    spdlog::info("calibrate: {} evaluations in {:.1f} s, loss ({}) {:.4f}", fit.evaluations,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                 o.loss, fit.objective);
  }

  // Every point, predicted with the (fitted) profile where it applies.
  std::vector<Row> rows;
  for (const auto& p : set.points) {
    const bool mine = profile && Fits(*profile, p);
    rows.push_back({&p, Predict(p, OptionsFor(p, o, mine ? profile.get() : nullptr)),
                    mine && p.excluded.empty() && !p.held_out});
  }
  std::vector<double> fitted_errors, held_errors, bounded_errors;
  std::map<std::string, std::vector<double>> case_errors, case_excluded_errors;
  nlohmann::json out{{"points", nlohmann::json::array()}};
  if (!o.json) {
    fmt::print("{:<58} {:<24} {:>11} {:>11} {:>8}\n", "point", "figure", "measured", "predicted",
               "error");
  }
  for (const Row& r : rows) {
    const std::vector<double> e = Errors(r);
    const std::string note = !r.prediction.error.empty()  ? "failed: " + r.prediction.error
                             : !r.point->excluded.empty() ? "excluded: " + r.point->excluded
                             : r.point->held_out          ? "held out"
                                                          : "";
    for (size_t m = 0; m < e.size(); ++m) {
      if (r.point->excluded.empty()) {
        (r.point->held_out ? held_errors : fitted_errors).push_back(e[m]);
        case_errors[r.point->case_name].push_back(e[m]);
      } else {
        case_excluded_errors[r.point->case_name].push_back(e[m]);
      }
      if (!o.json) {
        fmt::print("{:<58} {:<24} {:>11.4g} {:>11.4g} {:>8}{}\n", m == 0 ? r.point->id : "",
                   r.point->metrics[m], r.point->measured[m], r.prediction.figures[m], Pct(e[m]),
                   m == 0 && !note.empty() ? "  (" + note + ")" : "");
      }
      out["points"].push_back(
          {{"point", r.point->id},
           {"case", r.point->case_name},
           {"metric", r.point->metrics[m]},
           {"measured", r.point->measured[m]},
           {"predicted", r.prediction.figures[m]},
           {"error", std::isnan(e[m]) ? nlohmann::json() : nlohmann::json(e[m])},
           {"held_out", r.point->held_out},
           {"excluded", r.point->excluded},
           {"fitted", r.fitted}});
    }
  }
  bool broken = false;
  out["cases"] = nlohmann::json::array();
  for (const auto& c : set.cases) {
    const double median = perfmodel::MedianAbs(case_errors[c.name]);
    const double excluded = perfmodel::MedianAbs(case_excluded_errors[c.name]);
    const bool bounded = c.verified && c.bound_pct > 0;
    const bool ok = !bounded || median * 100 <= c.bound_pct;
    if (bounded) {
      bounded_errors.insert(bounded_errors.end(), case_errors[c.name].begin(),
                            case_errors[c.name].end());
    }
    broken = broken || !ok;
    out["cases"].push_back(
        {{"case", c.name},
         {"source", c.source},
         {"verified", c.verified},
         {"median_abs_error", std::isnan(median) ? nlohmann::json() : nlohmann::json(median)},
         {"excluded_median_abs_error",
          std::isnan(excluded) ? nlohmann::json() : nlohmann::json(excluded)},
         {"bound_pct", c.bound_pct},
         {"ok", ok}});
    if (!o.json) {
      fmt::print(
          "case {}: median |error| {}{}{}{}\n", c.name,
          std::isnan(median) ? "n/a" : fmt::format("{:.1f}%", median * 100),
          bounded ? fmt::format(" (bound {:.0f}%: {})", c.bound_pct, ok ? "ok" : "BROKEN")
                  : " (reported only)",
          std::isnan(excluded) ? "" : fmt::format("; excluded points {:.1f}%", excluded * 100),
          c.verified ? "" : ", UNVERIFIED source");
    }
  }
  const double all_median = perfmodel::MedianAbs(bounded_errors);
  if (set.median_bound_pct > 0 && !bounded_errors.empty()) {
    const bool ok = all_median * 100 <= set.median_bound_pct;
    broken = broken || !ok;
    if (!o.json) {
      fmt::print("all bounded cases: median |error| {:.1f}% over {} figures (bound {:.0f}%: {})\n",
                 all_median * 100, bounded_errors.size(), set.median_bound_pct,
                 ok ? "ok" : "BROKEN");
    }
  }
  const double fit_median = perfmodel::MedianAbs(fitted_errors);
  const double held_median = perfmodel::MedianAbs(held_errors);
  if (!held_errors.empty() && o.holdout_bound_pct > 0) {
    broken = broken || held_median * 100 > o.holdout_bound_pct;
  }
  out["median_abs_error"] = fit_median;
  out["held_out_median_abs_error"] =
      held_errors.empty() ? nlohmann::json() : nlohmann::json(held_median);
  out["bounded_median_abs_error"] =
      bounded_errors.empty() ? nlohmann::json() : nlohmann::json(all_median);
  if (!o.json) {
    fmt::print("median |error| {:.1f}% over {} figures", fit_median * 100, fitted_errors.size());
    if (!held_errors.empty()) {
      fmt::print("; held out: {:.1f}% over {} figures", held_median * 100, held_errors.size());
    }
    fmt::print("\n");
  }

  if (profile && !fit_names.empty()) {
    perfmodel::Calibration& c = profile->calibration;
    // A staged fit (a fitted profile fitted again, e.g. --fit-only on MoE points) keeps the
    // earlier stages' commands.
    const std::string earlier = c.fitted ? c.fitted_by + "; then " : "";
    c = {};
    c.fitted = true;
    c.fitted_at = Today();
    // The profile by its name, not the path it was read from (a staged fit's is temporary).
    std::string line = o.command_line;
    if (const size_t at = line.find(" --engine-profile " + o.engine_profile);
        at != std::string::npos) {
      line.replace(at, o.engine_profile.size() + 18, " --engine-profile " + profile->name);
    }
    c.fitted_by = earlier + line;
    std::set<std::string> sources;
    std::vector<double> errors;
    for (const Row& r : rows) {
      if (!r.fitted) continue;
      ++c.points;
      if (sources.insert(r.point->source).second) c.sources.push_back(r.point->source);
      perfmodel::ExtendRange(r.prediction.shape, &c.range);
      const std::vector<double> e = Errors(r);
      errors.insert(errors.end(), e.begin(), e.end());
    }
    c.fit_error_pct = std::round(perfmodel::MedianAbs(errors) * 1000) / 10;
    if (!o.name.empty()) profile->name = o.name;
    out["profile"] = perfmodel::EngineProfileYaml(*profile, "");
    if (!o.out.empty()) {
      std::ofstream file(o.out);
      file << perfmodel::EngineProfileYaml(
          *profile, fmt::format("Engine profile {} for {}, fitted by `servesweep calibrate` on {}\n"
                                "on {} points ({}): median |error| {:.1f}% over their figures.\n"
                                "Command: {}",
                                profile->name, profile->engine, c.fitted_at, c.points,
                                fmt::join(c.sources, "; "), c.fit_error_pct, c.fitted_by));
      if (!file) {
        spdlog::error("{}: cannot write the engine profile", o.out);
        return kExitError;
      }
      if (!o.json) fmt::print("wrote {}\n", o.out);
    }
  }
  if (o.json) fmt::print("{}\n", out.dump(2));
  return o.check && broken ? kExitError : kExitOk;
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Fit an engine profile's coefficients to measured runs and published points, or check "
      "the model's error on them");
  cmd->add_option("--published", o->published,
                  "Published points: a YAML table of cases (tests/fidelity/published.yaml)");
  cmd->add_option("--db", o->dbs, "Measured runs: a results.db of real runs");
  cmd->add_option("--metrics", o->metrics, "Figures of --db runs to fit (results columns)")
      ->capture_default_str();
  cmd->add_option("--engine-profile", o->engine_profile,
                  "The engine profile to fit (or to evaluate every point with): a shipped name "
                  "or a YAML path");
  cmd->add_option("--fit", o->fit,
                  "Coefficients to fit, comma-separated, each name or name:min:max (physical "
                  "bounds), e.g. cpu.step_us,kernels.attention_efficiency.mla:0.2:1");
  cmd->add_flag("--fit-default", o->fit_default,
                "Fit the default set: weight-read and GEMM efficiency, CPU per step and per "
                "request, front end, all-reduce floor");
  cmd->add_option("--holdout", o->holdout,
                  "Points to predict but not fit: key=value[,key=value] (e.g. concurrency=2)");
  cmd->add_option("--fit-only", o->fit_only,
                  "Fit to these points only (key=value[,key=value]); the profile's calibration "
                  "still covers every point of its engine: fit in stages, e.g. MoE coefficients "
                  "on MoE points after the dense ones");
  cmd->add_option("--holdout-bound-pct", o->holdout_bound_pct,
                  "With --check: the held-out figures' median |error| must be at most this");
  cmd->add_option("--hardware", o->hardware,
                  "Hardware profile of --db runs (and of points whose spec names none)");
  cmd->add_option("--model-profile", o->model_profile,
                  "Model profile of --db runs whose served name names none (e.g. smollm2-135m)");
  cmd->add_option("--out", o->out, "Write the fitted profile here (YAML)");
  cmd->add_option("--name", o->name, "Name of the written profile (default: the fitted one's)");
  cmd->add_option("--max-evaluations", o->max_evaluations, "Model evaluations of the fit")
      ->capture_default_str();
  cmd->add_option("--loss", o->loss,
                  "What the fit minimises over the figures: squared (mean log error squared) or "
                  "absolute (mean |log error|, less pulled by one noisy figure)")
      ->check(CLI::IsMember({"squared", "absolute"}))
      ->capture_default_str();
  cmd->add_flag("--check", o->check,
                "Exit 1 when a case's bound, the table's median bound or the held-out bound is "
                "broken");
  cmd->add_flag("--json", o->json, "Print points, errors, cases and the profile as JSON");
  cmd->callback([o, exit_code] {
    // What the profile says it was fitted by: the inputs and the fit, not the output options.
    std::string& line = o->command_line;
    line = "servesweep calibrate";
    for (const auto& p : o->published) line += " --published " + p;
    for (const auto& d : o->dbs) line += " --db " + d;
    if (!o->engine_profile.empty()) line += " --engine-profile " + o->engine_profile;
    if (!o->fit.empty()) line += " --fit " + o->fit;
    if (o->fit_default) line += " --fit-default";
    if (!o->holdout.empty()) line += " --holdout " + o->holdout;
    if (!o->fit_only.empty()) line += " --fit-only " + o->fit_only;
    if (o->loss != "squared") line += " --loss " + o->loss;
    if (!o->hardware.empty()) line += " --hardware " + o->hardware;
    if (!o->model_profile.empty()) line += " --model-profile " + o->model_profile;
    *exit_code = Run(*o);
  });
}

}  // namespace servesweep::cli
