// `servesweep calibrate`: fits an engine profile's coefficients to measured runs (results
// databases) and published points (a YAML table of conditions and figures with their sources),
// minimising the log error over their figures (TTFT, TPOT/ITL, E2E, throughput; squared, or
// absolute with --loss absolute), prints every figure's error and the medians, and writes the
// profile with what it was fitted on. Without --fit it only evaluates (the shipped profiles, or
// --engine-profile) and, with --check, fails when a case's bound is broken: the fidelity suite
// (tests/fidelity) runs it so.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "calibration/calibrate.h"
#include "calibration/cross_validate.h"
#include "cli/commands.h"
#include "perfmodel/engine_profile.h"
#include "perfmodel/error_bands.h"

namespace servesweep::cli {
namespace {

struct CalibrateOptions {
  calibration::CalibrateRequest request;
  std::string metrics = "ttft_median_ms,tpot_median_ms,e2el_median_ms,output_throughput";
  std::string fit;
  bool fit_default = false;
  std::string loss = "squared";
  std::string out;
  bool check = false;
  bool json = false;
  bool cross_validate = false;
  std::vector<std::string> recipes;  // PROFILE=COEFFICIENTS, cross-validated and pooled
  std::string bands_out;  // with --cross-validate: the bands as profiles/error_bands.yaml
};

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream parts(text);
  for (std::string part; std::getline(parts, part, ',');) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::string Today() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof(text), "%Y-%m-%d", &utc);
  return text;
}

std::string Pct(double v) { return std::isnan(v) ? "n/a" : fmt::format("{:+.1f}%", v * 100); }
nlohmann::json Number(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }

void PrintText(const calibration::CalibrationReport& report) {
  fmt::print("{:<58} {:<24} {:>11} {:>11} {:>8}\n", "point", "figure", "measured", "predicted",
             "error");
  for (const auto& row : report.points) {
    const std::string note = row.Note();
    for (size_t m = 0; m < row.errors.size(); ++m) {
      fmt::print("{:<58} {:<24} {:>11.4g} {:>11.4g} {:>8}{}\n", m == 0 ? row.point->id : "",
                 row.point->metrics[m], row.point->measured[m], row.prediction.figures[m],
                 Pct(row.errors[m]), m == 0 && !note.empty() ? "  (" + note + ")" : "");
    }
  }
  for (const auto& c : report.cases) {
    const calibration::PublishedCase& pc = *c.published;
    fmt::print(
        "case {}: median |error| {}{}{}{}\n", pc.name,
        std::isnan(c.median_abs_error) ? "n/a" : fmt::format("{:.1f}%", c.median_abs_error * 100),
        c.bounded ? fmt::format(" (bound {:.0f}%: {})", pc.bound_pct, c.ok ? "ok" : "BROKEN")
                  : " (reported only)",
        std::isnan(c.excluded_median_abs_error)
            ? ""
            : fmt::format("; excluded points {:.1f}%", c.excluded_median_abs_error * 100),
        pc.verified ? "" : ", UNVERIFIED source");
  }
  if (report.set.median_bound_pct > 0 && report.bounded_figures > 0) {
    fmt::print("all bounded cases: median |error| {:.1f}% over {} figures (bound {:.0f}%: {})\n",
               report.bounded_median_abs_error * 100, report.bounded_figures,
               report.set.median_bound_pct, report.bounded_ok ? "ok" : "BROKEN");
  }
  fmt::print("median |error| {:.1f}% over {} figures", report.median_abs_error * 100,
             report.median_figures);
  if (report.held_out_figures > 0) {
    fmt::print("; held out: {:.1f}% over {} figures", report.held_out_median_abs_error * 100,
               report.held_out_figures);
  }
  fmt::print("\n");
}

nlohmann::json ReportJson(const calibration::CalibrationReport& report) {
  nlohmann::json out{{"points", nlohmann::json::array()}, {"cases", nlohmann::json::array()}};
  for (const auto& row : report.points) {
    const calibration::CalibrationPoint& p = *row.point;
    for (size_t m = 0; m < row.errors.size(); ++m) {
      out["points"].push_back({{"point", p.id},
                               {"case", p.case_name},
                               {"metric", p.metrics[m]},
                               {"measured", p.measured[m]},
                               {"predicted", row.prediction.figures[m]},
                               {"error", Number(row.errors[m])},
                               {"held_out", p.held_out},
                               {"excluded", p.excluded},
                               {"fitted", row.fitted}});
    }
  }
  for (const auto& c : report.cases) {
    out["cases"].push_back({{"case", c.published->name},
                            {"source", c.published->source},
                            {"verified", c.published->verified},
                            {"median_abs_error", Number(c.median_abs_error)},
                            {"excluded_median_abs_error", Number(c.excluded_median_abs_error)},
                            {"bound_pct", c.published->bound_pct},
                            {"ok", c.ok}});
  }
  out["median_abs_error"] = report.median_abs_error;
  out["held_out_median_abs_error"] = Number(report.held_out_median_abs_error);
  out["bounded_median_abs_error"] = Number(report.bounded_median_abs_error);
  if (report.fitted) out["profile"] = perfmodel::EngineProfileYaml(*report.profile, "");
  return out;
}

std::string BandText(const calibration::ErrorBand& b) {
  if (b.figures == 0) return "no figure";
  const std::string range = fmt::format("{} / {}", Pct(b.low), Pct(b.high));
  if (b.known()) return range;
  return fmt::format("unknown ({} case{}; {} needed; seen {})", b.cases, b.cases == 1 ? "" : "s",
                     calibration::kMinBandCases, range);
}

// Distinct published cases (or databases) that gave held-out figures.
size_t CasesWithFigures(const calibration::CrossValidation& cv) {
  std::set<std::string> names;
  for (const auto& f : cv.figures) names.insert(f.case_name);
  return names.size();
}

void PrintCrossValidation(const calibration::CrossValidation& cv) {
  fmt::print("{:<58} {:<24} {:>11} {:>11} {:>8}  {}\n", "held-out point", "figure", "measured",
             "predicted", "error", "kind");
  std::string last;
  for (const auto& f : cv.figures) {
    fmt::print("{:<58} {:<24} {:>11.4g} {:>11.4g} {:>8}  {}{}\n",
               f.point_id == last ? "" : f.point_id, f.metric, f.measured, f.predicted,
               Pct(f.error), perfmodel::ExtrapolationKindName(f.kind),
               f.outside.empty() ? "" : " (" + f.outside + ")");
    last = f.point_id;
  }
  for (const auto& c : cv.cases) {
    fmt::print(
        "held out {} ({}): median |error| {} over {} figures{}\n", c.name, c.profile,
        std::isnan(c.median_abs_error) ? "n/a" : fmt::format("{:.1f}%", c.median_abs_error * 100),
        c.figures,
        !c.not_cross_validated.empty() ? ": not cross-validated: " + c.not_cross_validated
        : c.refitted                   ? ""
                     : " (nothing else to fit: the unfitted start profile predicted it)");
  }
  fmt::print("{:<20} {:>7} {:>5} {:>14}  {}\n", "kind", "figures", "cases", "median |error|",
             "80% of figures within");
  for (int k = 0; k < perfmodel::kExtrapolationKinds; ++k) {
    const calibration::ErrorBand& b = cv.bands[k];
    if (b.figures == 0) continue;
    fmt::print("{:<20} {:>7} {:>5} {:>13.1f}%  {}\n",
               perfmodel::ExtrapolationKindName(static_cast<perfmodel::ExtrapolationKind>(k)),
               b.figures, b.cases, b.median_abs * 100, BandText(b));
  }
  fmt::print(
      "leave-one-case-out: median |error| {:.1f}% over {} figures of {} cases ({} held out by "
      "their profiles, {} fits, {:.1f} s)\n",
      cv.median_abs_error * 100, cv.figures.size(), CasesWithFigures(cv), cv.cases.size(), cv.fits,
      cv.fit_seconds);
  if (cv.judged_figures > 0) {
    fmt::print(
        "coverage: {:.0f}% of {} figures inside their kind's 80% band measured without "
        "their own case; median band width {:.1f} points\n",
        cv.coverage * 100, cv.judged_figures, cv.median_band_width * 100);
  } else {
    fmt::print("coverage: not judged (no kind has figures of {} other cases)\n",
               calibration::kMinBandCases);
  }
}

nlohmann::json CrossValidationJson(const calibration::CrossValidation& cv) {
  nlohmann::json out{{"figures", nlohmann::json::array()},
                     {"cases", nlohmann::json::array()},
                     {"bands", nlohmann::json::array()}};
  for (const auto& f : cv.figures) {
    out["figures"].push_back({{"case", f.case_name},
                              {"point", f.point_id},
                              {"metric", f.metric},
                              {"measured", f.measured},
                              {"predicted", Number(f.predicted)},
                              {"error", Number(f.error)},
                              {"kind", perfmodel::ExtrapolationKindName(f.kind)},
                              {"outside", f.outside}});
  }
  for (const auto& c : cv.cases) {
    out["cases"].push_back({{"case", c.name},
                            {"profile", c.profile},
                            {"figures", c.figures},
                            {"median_abs_error", Number(c.median_abs_error)},
                            {"refitted", c.refitted},
                            {"evaluations", c.evaluations},
                            {"not_cross_validated", c.not_cross_validated}});
  }
  for (int k = 0; k < perfmodel::kExtrapolationKinds; ++k) {
    const calibration::ErrorBand& b = cv.bands[k];
    out["bands"].push_back(
        {{"kind", perfmodel::ExtrapolationKindName(static_cast<perfmodel::ExtrapolationKind>(k))},
         {"figures", b.figures},
         {"cases", b.cases},
         {"known", b.known()},
         {"low", Number(b.low)},
         {"high", Number(b.high)},
         {"median_abs_error", Number(b.median_abs)}});
  }
  out["median_abs_error"] = Number(cv.median_abs_error);
  out["judged_figures"] = cv.judged_figures;
  out["coverage"] = Number(cv.coverage);
  out["median_band_width"] = Number(cv.median_band_width);
  return out;
}

int RunCrossValidation(const CalibrateOptions& o) {
  std::vector<calibration::CalibrateRequest> requests;
  for (const std::string& recipe : o.recipes) {
    // PROFILE=COEFFICIENTS[@EVALUATIONS]: a 2-coefficient fit needs far fewer evaluations
    // than a 6-coefficient one, and the slow MoE profiles cost 0.4-0.7 s per evaluation.
    const size_t eq = recipe.find('=');
    const size_t at = recipe.rfind('@');
    const size_t end = at == std::string::npos || at < eq ? recipe.size() : at;
    if (eq == std::string::npos || eq == 0 || eq + 1 >= end) {
      spdlog::error("calibrate --recipe: expected PROFILE=COEFFICIENTS[@EVALUATIONS], found '{}'",
                    recipe);
      return kExitError;
    }
    requests.push_back(o.request);
    requests.back().engine_profile = recipe.substr(0, eq);
    requests.back().fit = Split(recipe.substr(eq + 1, end - eq - 1));
    if (end < recipe.size()) {
      const std::string budget = recipe.substr(end + 1);
      int evaluations = 0;
      const auto [ptr, ec] =
          std::from_chars(budget.data(), budget.data() + budget.size(), evaluations);
      if (ec != std::errc() || ptr != budget.data() + budget.size() || evaluations < 1) {
        spdlog::error(
            "calibrate --recipe: expected a positive number of evaluations after '@', found '{}' "
            "in '{}'",
            budget, recipe);
        return kExitError;
      }
      requests.back().fit_options.max_evaluations = evaluations;
    }
  }
  if (requests.empty()) requests.push_back(o.request);
  calibration::CrossValidation cv;
  if (Status s = calibration::CrossValidate(requests, &cv); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  if (o.json) {
    fmt::print("{}\n", CrossValidationJson(cv).dump(2));
  } else {
    PrintCrossValidation(cv);
  }
  if (!o.bands_out.empty()) {
    perfmodel::ErrorBands bands;
    bands.measured_by = o.request.fitted_by;
    bands.measured_at = o.request.fitted_at;
    for (int k = 0; k < perfmodel::kExtrapolationKinds; ++k) {
      const calibration::ErrorBand& b = cv.bands[k];
      bands.bands[k] = {b.figures, b.cases, b.low * 100, b.high * 100};
    }
    std::ofstream file(o.bands_out);
    file << perfmodel::ErrorBandsYaml(
        bands,
        fmt::format("The performance model's cross-validated error per kind of "
                    "extrapolation (perfmodel/error_bands.h):\n{} held-out figures of {} "
                    "cases, median |error| {:.1f}%; coverage {}.",
                    cv.figures.size(), CasesWithFigures(cv), cv.median_abs_error * 100,
                    cv.judged_figures > 0 ? fmt::format("{:.0f}% of {} judged figures",
                                                        cv.coverage * 100, cv.judged_figures)
                                          : std::string("not judged (no kind has 3 other cases)")));
    if (!file) {
      spdlog::error("{}: cannot write the error bands", o.bands_out);
      return kExitError;
    }
    if (!o.json) fmt::print("wrote {}\n", o.bands_out);
  }
  return kExitOk;
}

int Run(CalibrateOptions& o) {
  calibration::CalibrateRequest& r = o.request;
  r.db_metrics = Split(o.metrics);
  r.fit = o.fit_default ? calibration::DefaultFitCoefficients() : Split(o.fit);
  r.loss = o.loss == "absolute" ? calibration::FitLoss::kAbsolute : calibration::FitLoss::kSquared;
  r.fitted_at = Today();
  if (o.cross_validate) return RunCrossValidation(o);
  calibration::CalibrationReport report;
  if (Status s = calibration::Calibrate(r, &report); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  if (report.fitted) {
    spdlog::info("calibrate: {} evaluations in {:.1f} s, loss ({}) {:.4f}", report.fit_evaluations,
                 report.fit_seconds, o.loss, report.fit_objective);
  }
  if (o.json) {
    fmt::print("{}\n", ReportJson(report).dump(2));
  } else {
    PrintText(report);
  }
  if (report.fitted && !o.out.empty()) {
    const perfmodel::EngineProfile& profile = *report.profile;
    const perfmodel::Calibration& c = profile.calibration;
    std::ofstream file(o.out);
    file << perfmodel::EngineProfileYaml(
        profile, fmt::format("Engine profile {} for {}, fitted by `servesweep calibrate` on {}\n"
                             "on {} points ({}): median |error| {:.1f}% over their figures.\n"
                             "Command: {}",
                             profile.name, profile.engine, c.fitted_at, c.points,
                             fmt::join(c.sources, "; "), c.fit_error_pct, c.fitted_by));
    if (!file) {
      spdlog::error("{}: cannot write the engine profile", o.out);
      return kExitError;
    }
    if (!o.json) fmt::print("wrote {}\n", o.out);
  }
  return o.check && report.broken ? kExitError : kExitOk;
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Fit an engine profile's coefficients to measured runs and published points, or check "
      "the model's error on them");
  cmd->add_option("--published", o->request.published,
                  "Published points: a YAML table of cases (tests/fidelity/published.yaml)");
  cmd->add_option("--db", o->request.dbs, "Measured runs: a results.db of real runs");
  cmd->add_option("--metrics", o->metrics, "Figures of --db runs to fit (results columns)")
      ->capture_default_str();
  cmd->add_option("--engine-profile", o->request.engine_profile,
                  "The engine profile to fit (or to evaluate every point with): a shipped name "
                  "or a YAML path");
  cmd->add_option("--fit", o->fit,
                  "Coefficients to fit, comma-separated, each name or name:min:max (physical "
                  "bounds), e.g. cpu.step_us,kernels.attention_efficiency.mla:0.2:1");
  cmd->add_flag("--fit-default", o->fit_default,
                "Fit the default set: weight-read and GEMM efficiency, CPU per step and per "
                "request, front end, all-reduce floor");
  cmd->add_option("--holdout", o->request.holdout,
                  "Points to predict but not fit: key=value[,key=value] (e.g. concurrency=2)");
  cmd->add_option("--fit-only", o->request.fit_only,
                  "Fit to these points only (key=value[,key=value]); the profile's calibration "
                  "still covers every point of its engine: fit in stages, e.g. MoE coefficients "
                  "on MoE points after the dense ones");
  cmd->add_option("--holdout-bound-pct", o->request.holdout_bound_pct,
                  "With --check: the held-out figures' median |error| must be at most this");
  cmd->add_option("--hardware", o->request.hardware,
                  "Hardware profile of --db runs (and of points whose spec names none)");
  cmd->add_option("--model-profile", o->request.model_profile,
                  "Model profile of --db runs whose served name names none (e.g. smollm2-135m)");
  cmd->add_option("--out", o->out, "Write the fitted profile here (YAML)");
  cmd->add_option("--name", o->request.fitted_name,
                  "Name of the written profile (default: the fitted one's)");
  cmd->add_option("--max-evaluations", o->request.fit_options.max_evaluations, "Model evaluations of the fit")
      ->capture_default_str();
  cmd->add_option("--loss", o->loss,
                  "What the fit minimises over the figures: squared (mean log error squared) or "
                  "absolute (mean |log error|, less pulled by one noisy figure)")
      ->check(CLI::IsMember({"squared", "absolute"}))
      ->capture_default_str();
  cmd->add_flag("--check", o->check,
                "Exit 1 when a case's bound, the table's median bound or the held-out bound is "
                "broken");
  cmd->add_flag("--cross-validate", o->cross_validate,
                "Leave one case out: fit again without each case (--engine-profile and --fit), "
                "predict it, and print the held-out errors and the 80% band per kind of "
                "extrapolation");
  cmd->add_option("--recipe", o->recipes,
                  "With --cross-validate, instead of --engine-profile and --fit: "
                  "PROFILE=COEFFICIENTS[@EVALUATIONS] (comma-separated coefficients; "
                  "@EVALUATIONS overrides --max-evaluations for that profile), repeated, one "
                  "per profile; their held-out figures are pooled into one set of bands");
  cmd->add_option("--bands-out", o->bands_out,
                  "With --cross-validate: write the bands per kind as an error-bands file "
                  "(profiles/error_bands.yaml is the shipped one: plan prints each run's band "
                  "from it)");
  cmd->add_flag("--json", o->json, "Print points, errors, cases and the profile as JSON");
  cmd->callback([o, exit_code] {
    // What the profile says it was fitted by: the inputs and the fit, not the output options.
    std::string& line = o->request.fitted_by;
    line = "servesweep calibrate";
    for (const auto& p : o->request.published) line += " --published " + p;
    for (const auto& d : o->request.dbs) line += " --db " + d;
    if (!o->request.engine_profile.empty())
      line += " --engine-profile " + o->request.engine_profile;
    if (!o->fit.empty()) line += " --fit " + o->fit;
    if (o->fit_default) line += " --fit-default";
    if (!o->request.holdout.empty()) line += " --holdout " + o->request.holdout;
    if (!o->request.fit_only.empty()) line += " --fit-only " + o->request.fit_only;
    if (o->loss != "squared") line += " --loss " + o->loss;
    if (!o->request.hardware.empty()) line += " --hardware " + o->request.hardware;
    if (!o->request.model_profile.empty()) line += " --model-profile " + o->request.model_profile;
    if (o->cross_validate) line += " --cross-validate";
    for (const auto& recipe : o->recipes) line += " --recipe " + recipe;
    if (o->request.fit_options.max_evaluations !=
        calibration::CalibrateRequest{}.fit_options.max_evaluations) {
      line += fmt::format(" --max-evaluations {}", o->request.fit_options.max_evaluations);
    }
    *exit_code = Run(*o);
  });
}

}  // namespace servesweep::cli
