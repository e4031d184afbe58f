#include "perfmodel/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "perfmodel/profiles.h"

namespace servesweep::perfmodel {
namespace {

constexpr double kFloor = 1e-9;  // smallest value a log-scale parameter takes

double Lower(const FitParameter& p) { return std::max(p.min_value, kFloor); }

std::vector<double> ToValues(const std::vector<FitParameter>& params,
                             const std::vector<double>& logs) {
  std::vector<double> v(logs.size());
  for (size_t i = 0; i < logs.size(); ++i) {
    v[i] = std::clamp(std::exp(logs[i]), Lower(params[i]), params[i].max_value);
  }
  return v;
}

}  // namespace

namespace {

// One Nelder-Mead descent from `start` (log scale) with the given first step; returns the best
// vertex and its value.
// Every vertex is projected into the bounds before it is evaluated or kept, so the simplex never
// spreads over flat ground outside them.
using Points = std::vector<double>;
std::pair<Points, double> Descend(const Points& start, double step,
                                  const std::function<double(const Points&)>& eval,
                                  const std::function<Points(Points)>& project,
                                  const FitOptions& options, const int* evaluations) {
  const size_t n = start.size();
  std::vector<Points> x(n + 1, start);
  std::vector<double> f(n + 1);
  for (size_t i = 0; i < n; ++i) {
    // Step inwards when a step outwards would leave the bounds.
    Points up = x[i + 1];
    up[i] += step;
    x[i + 1] = project(up);
    if (x[i + 1][i] == start[i]) x[i + 1][i] -= step;
  }
  for (size_t i = 0; i <= n; ++i) f[i] = eval(x[i]);
  std::vector<size_t> order(n + 1);
  while (*evaluations < options.max_evaluations) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f[a] < f[b]; });
    const size_t best = order.front(), worst = order.back(), second = order[n - 1];
    if (f[worst] - f[best] < options.tolerance) break;
    std::vector<double> centroid(n, 0);
    for (size_t k = 0; k < n; ++k) {
      for (size_t i = 0; i < n; ++i) centroid[i] += x[order[k]][i] / static_cast<double>(n);
    }
    auto along = [&](double t) {
      Points p(n);
      for (size_t i = 0; i < n; ++i) p[i] = centroid[i] + t * (x[worst][i] - centroid[i]);
      return project(p);
    };
    const std::vector<double> reflected = along(-1);
    const double fr = eval(reflected);
    if (fr < f[best]) {
      const std::vector<double> expanded = along(-2);
      const double fe = eval(expanded);
      if (fe < fr) {
        x[worst] = expanded, f[worst] = fe;
      } else {
        x[worst] = reflected, f[worst] = fr;
      }
      continue;
    }
    if (fr < f[second]) {
      x[worst] = reflected, f[worst] = fr;
      continue;
    }
    const std::vector<double> contracted = fr < f[worst] ? along(-0.5) : along(0.5);
    const double fc = eval(contracted);
    if (fc < std::min(fr, f[worst])) {
      x[worst] = contracted, f[worst] = fc;
      continue;
    }
    // Shrink towards the best vertex.
    for (size_t k = 0; k <= n; ++k) {
      if (k == best) continue;
      for (size_t i = 0; i < n; ++i) x[k][i] = x[best][i] + 0.5 * (x[k][i] - x[best][i]);
      f[k] = eval(x[k]);
    }
  }
  const auto best = static_cast<size_t>(std::min_element(f.begin(), f.end()) - f.begin());
  return {x[best], f[best]};
}

}  // namespace

FitResult FitCoefficients(const std::vector<FitParameter>& params, const FitObjective& objective,
                          const FitOptions& options) {
  const size_t n = params.size();
  FitResult result;
  std::vector<double> best(n);
  for (size_t i = 0; i < n; ++i) {
    best[i] = std::log(std::clamp(params[i].initial, Lower(params[i]), params[i].max_value));
  }
  // Points clamped to the bounds, so the simplex cannot wander where values do not change.
  auto clamp = [&](std::vector<double> logs) {
    for (size_t i = 0; i < n; ++i) {
      logs[i] = std::clamp(logs[i], std::log(Lower(params[i])), std::log(params[i].max_value));
    }
    return logs;
  };
  auto eval = [&](const std::vector<double>& logs) {
    ++result.evaluations;
    const double f = objective(ToValues(params, logs));
    return std::isfinite(f) ? f : std::numeric_limits<double>::max();
  };
  double best_f = eval(best);
  // First, coordinate scans over a log grid (x 1/20 .. x 20 around the current value by default,
  // within the bounds): the simulated objective is piecewise flat (a request waits for the step
  // in flight, so small changes often change nothing), which stalls a simplex that starts small.
  for (int sweep = 0; sweep < options.scan_sweeps && n > 0; ++sweep) {
    for (size_t i = 0; i < n; ++i) {
      const double centre = best[i];
      for (int k = -options.scan_points; k <= options.scan_points; ++k) {
        if (k == 0 || result.evaluations >= options.max_evaluations) continue;
        std::vector<double> p = best;
        p[i] = centre + options.scan_span * k / options.scan_points;
        p = clamp(p);
        if (p[i] == best[i]) continue;
        const double f = eval(p);
        if (f < best_f) best = p, best_f = f;
      }
    }
  }
  // Then restarts from the best point with a smaller first step: the simulated objective is
  // piecewise flat (steps are discrete), where one descent stalls early.
  double step = options.initial_step;
  while (n > 0 && result.evaluations < options.max_evaluations) {
    auto [x, f] = Descend(best, step, eval, clamp, options, &result.evaluations);
    const bool improved = f < best_f - options.tolerance;
    if (f < best_f) best = x, best_f = f;
    if (!improved) {
      step /= 2;
      if (step < options.initial_step / 8) break;
    }
  }
  result.values = ToValues(params, best);
  result.objective = best_f;
  return result;
}

namespace {

double MeanLogError(const std::vector<double>& predicted, const std::vector<double>& measured,
                    double (*loss)(double)) {
  double sum = 0;
  size_t count = 0;
  for (size_t i = 0; i < predicted.size() && i < measured.size(); ++i) {
    if (!(measured[i] > 0)) continue;
    sum += loss(predicted[i] > 0 ? std::log(predicted[i] / measured[i]) : std::log(10.0));
    ++count;
  }
  return count > 0 ? sum / static_cast<double>(count) : 0;
}

}  // namespace

double MeanSquaredLogError(const std::vector<double>& predicted,
                           const std::vector<double>& measured) {
  return MeanLogError(predicted, measured, [](double e) { return e * e; });
}

double MeanAbsoluteLogError(const std::vector<double>& predicted,
                            const std::vector<double>& measured) {
  return MeanLogError(predicted, measured, [](double e) { return std::fabs(e); });
}

double RelativeError(double predicted, double measured) {
  if (!(predicted > 0) || !(measured > 0)) return std::numeric_limits<double>::quiet_NaN();
  return predicted / measured - 1;
}

double MedianAbs(std::vector<double> values) {
  std::vector<double> a;
  for (double v : values) {
    if (!std::isnan(v)) a.push_back(std::fabs(v));
  }
  if (a.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(a.begin(), a.end());
  const size_t m = a.size() / 2;
  return a.size() % 2 == 1 ? a[m] : (a[m - 1] + a[m]) / 2;
}

namespace {

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool Contains(const std::vector<std::string>& items, const std::string& s) {
  return std::find(items.begin(), items.end(), s) != items.end();
}

// A value outside [low, high] by more than 10% (the points' spread) is an extrapolation.
void CheckRange(const char* what, double value, double low, double high,
                std::vector<std::string>* out) {
  if (value < low / 1.1) {
    out->push_back(fmt::format("{} {:.4g} below the fitted {:.4g}", what, value, low));
  } else if (value > high * 1.1) {
    out->push_back(fmt::format("{} {:.4g} above the fitted {:.4g}", what, value, high));
  }
}

}  // namespace

bool InCalibratedRange(const Calibration& c, const RunShape& run, std::string* why) {
  std::vector<std::string> out;
  const CalibrationRange& g = c.range;
  if (!Contains(g.models, run.model)) {
    out.push_back(fmt::format("model {} not fitted (fitted: {})", run.model, Joined(g.models)));
  }
  if (!Contains(g.hardware, run.hardware)) {
    out.push_back(
        fmt::format("hardware {} not fitted (fitted: {})", run.hardware, Joined(g.hardware)));
  }
  if (!Contains(g.layouts, run.layout)) {
    out.push_back(fmt::format("layout {} not fitted (fitted: {})", run.layout, Joined(g.layouts)));
  }
  CheckRange("input", run.input_tok, g.input_tok_min, g.input_tok_max, &out);
  CheckRange("output", run.output_tok, g.output_tok_min, g.output_tok_max, &out);
  CheckRange("load", run.load, g.load_min, g.load_max, &out);
  *why = Joined(out);
  return out.empty();
}

const char* ExtrapolationKindName(ExtrapolationKind kind) {
  switch (kind) {
    case ExtrapolationKind::kInRange:
      return "in range";
    case ExtrapolationKind::kOtherShape:
      return "other shape";
    case ExtrapolationKind::kOtherModel:
      return "other model";
    case ExtrapolationKind::kOtherArchitecture:
      return "other architecture";
    case ExtrapolationKind::kOtherHardware:
      return "other hardware";
    case ExtrapolationKind::kOtherVersion:
      return "other version";
    case ExtrapolationKind::kUncalibrated:
      return "uncalibrated";
  }
  return "?";
}

namespace {

// "moe mla", "dense gqa": what the model's kernels are; the model's own name when it has no
// profile (then only itself is of its kind).
std::string ArchitectureKind(const std::string& model_name) {
  ModelProfile model;
  if (!LoadModelProfile(model_name, &model).ok()) return "unprofiled " + model_name;
  return fmt::format("{} {}{}", ModelArchitecture(model),
                     model.attention == AttentionKind::kMla ? "mla" : "gqa",
                     model.sparse_layers > 0 ? " sparse" : "");
}

}  // namespace

ExtrapolationKind ClassifyRun(const Calibration& c, const RunShape& run) {
  if (!c.fitted) return ExtrapolationKind::kUncalibrated;
  const CalibrationRange& g = c.range;
  if (!Contains(g.hardware, run.hardware)) return ExtrapolationKind::kOtherHardware;
  if (!Contains(g.models, run.model)) {
    const std::string kind = ArchitectureKind(run.model);
    for (const auto& fitted : g.models) {
      if (ArchitectureKind(fitted) == kind) return ExtrapolationKind::kOtherModel;
    }
    return ExtrapolationKind::kOtherArchitecture;
  }
  std::string why;
  return InCalibratedRange(c, run, &why) ? ExtrapolationKind::kInRange
                                         : ExtrapolationKind::kOtherShape;
}

std::string LayoutName(int tp, int pp, int dp, int ep, bool dp_attention, int prefill_instances,
                       int decode_instances) {
  std::string out = prefill_instances > 0
                        ? fmt::format("{}p+{}d tp{}", prefill_instances, decode_instances, tp)
                        : fmt::format("tp{}", tp);
  if (pp > 1) out += fmt::format(" pp{}", pp);
  if (dp > 1 && prefill_instances == 0) out += fmt::format(" dp{}", dp);
  if (dp_attention) out += " dp-attention";
  if (ep > 1) out += fmt::format(" ep{}", ep);
  return out;
}

void ExtendRange(const RunShape& run, CalibrationRange* g) {
  auto add = [](std::vector<std::string>* items, const std::string& s) {
    if (!Contains(*items, s)) items->push_back(s);
  };
  const bool first = g->models.empty() && g->hardware.empty() && g->layouts.empty();
  add(&g->models, run.model);
  add(&g->hardware, run.hardware);
  add(&g->layouts, run.layout);
  auto widen = [first](double v, double* low, double* high) {
    *low = first ? v : std::min(*low, v);
    *high = first ? v : std::max(*high, v);
  };
  widen(run.input_tok, &g->input_tok_min, &g->input_tok_max);
  widen(run.output_tok, &g->output_tok_min, &g->output_tok_max);
  widen(run.load, &g->load_min, &g->load_max);
}

}  // namespace servesweep::perfmodel
