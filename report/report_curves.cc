#include "report/report_curves.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace servesweep::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string Level(double level) { return fmt::format("{:g}", level); }

}  // namespace

double PerUserTokPerS(double tpot_median_ms) {
  return tpot_median_ms > 0 && std::isfinite(tpot_median_ms) ? 1000.0 / tpot_median_ms : kNaN;
}

Range RangeOf(std::vector<double> values) {
  values.erase(
      std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
      values.end());
  Range r;
  r.runs = values.size();
  if (values.empty()) return r;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  r.median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  r.min = values.front();
  r.max = values.back();
  return r;
}

const Range* CurvePoint::Get(const std::string& figure) const {
  auto it = figures.find(figure);
  return it == figures.end() || it->second.runs == 0 ? nullptr : &it->second;
}

double CurvePoint::Median(const std::string& figure) const {
  const Range* r = Get(figure);
  return r ? r->median : kNaN;
}

std::vector<Curve> BuildCurves(const std::vector<CurveRun>& runs) {
  std::vector<Curve> curves;
  std::map<std::string, std::map<double, std::vector<const CurveRun*>>> grouped;
  for (const auto& run : runs) {
    if (!grouped.count(run.config)) curves.push_back({run.config, {}});
    grouped[run.config][run.level].push_back(&run);
  }
  for (auto& curve : curves) {
    for (const auto& [level, repeats] : grouped[curve.config]) {
      CurvePoint point;
      point.level = level;
      std::map<std::string, std::vector<double>> values;
      for (const CurveRun* run : repeats) {
        for (const auto& [name, value] : run->figures) values[name].push_back(value);
      }
      for (auto& [name, list] : values) {
        Range range = RangeOf(std::move(list));
        if (range.runs > 0) point.figures[name] = range;
      }
      point.has_slo = std::all_of(repeats.begin(), repeats.end(),
                                  [](const CurveRun* r) { return r->slo_attainment.has_value(); });
      if (point.has_slo) {
        point.slo_attainment_min = 1;
        for (const CurveRun* r : repeats) {
          point.slo_attainment_min = std::min(point.slo_attainment_min, *r->slo_attainment);
        }
        point.meets_slo = point.slo_attainment_min >= kSloAttainment;
      }
      curve.points.push_back(std::move(point));
    }
  }
  return curves;
}

std::vector<size_t> ParetoFrontier(const std::vector<XY>& points) {
  std::vector<size_t> frontier;
  for (size_t i = 0; i < points.size(); ++i) {
    const XY& p = points[i];
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    bool dominated = false;
    for (size_t j = 0; j < points.size() && !dominated; ++j) {
      const XY& q = points[j];
      if (j == i || !std::isfinite(q.x) || !std::isfinite(q.y)) continue;
      dominated = q.x >= p.x && q.y >= p.y && (q.x > p.x || q.y > p.y);
    }
    // Of equal points keep the first only.
    for (size_t j = 0; j < i && !dominated; ++j) {
      dominated = points[j].x == p.x && points[j].y == p.y;
    }
    if (!dominated) frontier.push_back(i);
  }
  std::sort(frontier.begin(), frontier.end(),
            [&](size_t a, size_t b) { return points[a].x < points[b].x; });
  return frontier;
}

Knee FindKnee(const std::vector<double>& levels, const std::vector<double>& throughput,
              double gain_per_doubling) {
  Knee knee;
  const size_t n = std::min(levels.size(), throughput.size());
  if (n < 2) {
    knee.reason = "fewer than two levels measured";
    return knee;
  }
  const double pct = gain_per_doubling * 100;
  for (size_t k = 0; k + 1 < n; ++k) {
    if (!(levels[k] > 0) || !std::isfinite(throughput[k]) || throughput[k] <= 0) continue;
    bool flat = true;
    for (size_t j = k + 1; j < n && flat; ++j) {
      if (!std::isfinite(throughput[j]) || !(levels[j] > levels[k])) continue;
      const double allowed =
          throughput[k] * std::pow(1 + gain_per_doubling, std::log2(levels[j] / levels[k]));
      flat = throughput[j] <= allowed;
    }
    if (flat) {
      knee.found = true;
      knee.index = k;
      knee.level = levels[k];
      knee.throughput = throughput[k];
      knee.reason = fmt::format("no higher level gains more than {:g}% per doubling after {}", pct,
                                Level(levels[k]));
      return knee;
    }
  }
  // Not found: say how steep the last step still is.
  const size_t a = n - 2, b = n - 1;
  if (levels[a] > 0 && levels[b] > levels[a] && throughput[a] > 0 && std::isfinite(throughput[b])) {
    const double per_doubling =
        std::pow(throughput[b] / throughput[a], 1 / std::log2(levels[b] / levels[a])) - 1;
    knee.reason = fmt::format("still climbing {:.0f}% per doubling at the last step ({} -> {})",
                              per_doubling * 100, Level(levels[a]), Level(levels[b]));
  } else {
    knee.reason = "no knee within the measured levels";
  }
  return knee;
}

SloPoint FindBestSloPoint(const Curve& curve, const std::string& throughput_figure) {
  SloPoint best;
  double best_attainment = -1;
  for (size_t i = 0; i < curve.points.size(); ++i) {
    const CurvePoint& p = curve.points[i];
    if (!p.has_slo) continue;
    best.has_slo = true;
    best_attainment = std::max(best_attainment, p.slo_attainment_min);
    const double throughput = p.Median(throughput_figure);
    if (!p.meets_slo || !std::isfinite(throughput)) continue;
    if (!best.found || throughput > best.throughput) {
      best.found = true;
      best.index = i;
      best.level = p.level;
      best.throughput = throughput;
    }
  }
  if (!best.has_slo) {
    best.reason = "no SLO in the matrix";
  } else if (!best.found) {
    best.reason = fmt::format("no level met the SLO (best attainment {:.2f} < {:.2f})",
                              best_attainment, kSloAttainment);
  } else {
    best.reason = fmt::format(
        "highest throughput with >= {:.0f}% of requests within every SLO limit in every repeat",
        kSloAttainment * 100);
  }
  return best;
}

std::optional<double> SloAttainment(double goodput_per_s, double duration_s, double completed,
                                    double failed) {
  if (!std::isfinite(goodput_per_s) || !std::isfinite(duration_s) || !(completed + failed > 0)) {
    return std::nullopt;
  }
  return std::clamp(goodput_per_s * duration_s / (completed + failed), 0.0, 1.0);
}

}  // namespace servesweep::report
