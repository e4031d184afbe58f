// The curves of a sweep's report: per configuration (a run's conditions and system minus its
// load level), one point per concurrency (or rate) level, each the median over the level's ok
// repeats with their min..max; and what is read off them: the Pareto frontier of output
// throughput per GPU vs output tokens/s per user, the knee (where throughput stops climbing)
// and the best SLO point (the highest throughput whose runs meet the SLO). Exact definitions
// in docs/report.md. Pure functions over plain values, so each is tested on synthetic curves.
//
// Thread-safety: plain functions and values.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace servesweep::report {

// Per-request decode speed as a user sees it: 1000 / TPOT median (ms) -> output tokens/s.
double PerUserTokPerS(double tpot_median_ms);

// One ok run, as the curves use it.
struct CurveRun {
  std::string config;  // configuration key (equal for runs that differ only in load level)
  double level = 0;    // concurrency, or the request rate of an open-loop run
  std::map<std::string, double> figures;  // record columns by name (NaN / absent = n/a)
  // SLO attainment: fraction of the measured requests (failed ones count as misses) that met
  // every SLO limit; absent when the run has no SLO.
  std::optional<double> slo_attainment;
};

struct Range {
  size_t runs = 0;  // repeats with a value
  double median = 0, min = 0, max = 0;
};
// Median (mean of the middle two for an even count), min and max; runs == 0 when empty.
Range RangeOf(std::vector<double> values);

struct CurvePoint {
  double level = 0;
  std::map<std::string, Range> figures;  // every figure some repeat of this level has
  // Every repeat at this level has an SLO and met it (attainment >= kSloAttainment).
  bool has_slo = false;
  bool meets_slo = false;
  double slo_attainment_min = 0;  // lowest attainment over the repeats
  const Range* Get(const std::string& figure) const;
  double Median(const std::string& figure) const;  // NaN when no repeat has the figure
};

struct Curve {
  std::string config;
  std::vector<CurvePoint> points;  // ascending level
};

// Groups runs by configuration (first-seen order) and level (ascending).
std::vector<Curve> BuildCurves(const std::vector<CurveRun>& runs);

// Indices of the points not dominated in (x, y), both higher-is-better: no other point is >= in
// both and > in one. Points with a NaN coordinate are never on the frontier. Ascending x.
struct XY {
  double x = 0, y = 0;
};
std::vector<size_t> ParetoFrontier(const std::vector<XY>& points);

// Knee: the lowest level L_k, with at least one higher level measured, such that no higher level
// L_j beats its throughput T_k by more than `gain_per_doubling` compounded per doubling of the
// level: T_j <= T_k * (1 + gain_per_doubling) ^ log2(L_j / L_k) for every j > k. A linear curve
// has none; noise within the allowance after a plateau does not move it.
constexpr double kKneeGainPerDoubling = 0.10;
struct Knee {
  bool found = false;
  size_t index = 0;  // into the levels given
  double level = 0, throughput = 0;
  // Why (found or not): "throughput gains at most 10%/doubling after concurrency 16", or
  // "still climbing 41%/doubling at the last step (32 -> 64)".
  std::string reason;
};
Knee FindKnee(const std::vector<double>& levels, const std::vector<double>& throughput,
              double gain_per_doubling = kKneeGainPerDoubling);

// Best SLO point: of the levels whose every repeat met the SLO (attainment >= kSloAttainment of
// the measured requests met every limit), the one with the highest median output throughput.
constexpr double kSloAttainment = 0.90;
struct SloPoint {
  bool has_slo = false;  // the curve's runs carry an SLO
  bool found = false;
  size_t index = 0;
  double level = 0, throughput = 0;
  std::string reason;  // "no SLO in the matrix", "no level met the SLO (best attainment 0.42)"
};
SloPoint FindBestSloPoint(const Curve& curve, const std::string& throughput_figure);

// The attainment of one run: goodput * duration / (completed + failed); absent without goodput.
std::optional<double> SloAttainment(double goodput_per_s, double duration_s, double completed,
                                    double failed);

}  // namespace servesweep::report
