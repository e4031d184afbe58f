// Report curves on synthetic data: grouping and medians over repeats, the Pareto frontier, the
// knee (saturating, linear, noisy, collapsing curves) and the best SLO point (never met, always
// met, met only at low load) (report/report_curves.h).
#include "report/report_curves.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::report {
namespace {

const std::vector<double> kLevels = {1, 2, 4, 8, 16, 32, 64, 128};

TEST(ReportCurves, PerUserRateIsTheInverseOfTpot) {
  EXPECT_DOUBLE_EQ(PerUserTokPerS(20), 50);
  EXPECT_TRUE(std::isnan(PerUserTokPerS(0)));
  EXPECT_TRUE(std::isnan(PerUserTokPerS(std::nan(""))));
}

TEST(ReportCurves, RangeIsMedianMinMaxOverFiniteValues) {
  const Range odd = RangeOf({3, 1, 2});
  EXPECT_EQ(odd.runs, 3u);
  EXPECT_DOUBLE_EQ(odd.median, 2);
  EXPECT_DOUBLE_EQ(odd.min, 1);
  EXPECT_DOUBLE_EQ(odd.max, 3);
  const Range even = RangeOf({4, 1, std::nan(""), 2, 10});
  EXPECT_EQ(even.runs, 4u);
  EXPECT_DOUBLE_EQ(even.median, 3);
  EXPECT_EQ(RangeOf({}).runs, 0u);
}

TEST(ReportCurves, BuildCurvesGroupsByConfigurationAndSortsLevels) {
  std::vector<CurveRun> runs;
  runs.push_back({"tp=2", 8, {{"output_throughput", 100}}, std::nullopt});
  runs.push_back({"tp=1", 4, {{"output_throughput", 50}}, std::nullopt});
  runs.push_back({"tp=2", 1, {{"output_throughput", 20}}, std::nullopt});
  runs.push_back({"tp=2", 8, {{"output_throughput", 120}}, std::nullopt});
  runs.push_back({"tp=2", 8, {{"output_throughput", 90}}, std::nullopt});
  const auto curves = BuildCurves(runs);
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[0].config, "tp=2");  // first seen first
  ASSERT_EQ(curves[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(curves[0].points[0].level, 1);
  const Range* r = curves[0].points[1].Get("output_throughput");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->runs, 3u);
  EXPECT_DOUBLE_EQ(r->median, 100);
  EXPECT_DOUBLE_EQ(r->min, 90);
  EXPECT_DOUBLE_EQ(r->max, 120);
  EXPECT_FALSE(curves[0].points[1].has_slo);
  EXPECT_TRUE(std::isnan(curves[0].points[1].Median("ttft_p95_ms")));
}

TEST(ReportCurves, ParetoFrontierKeepsTheNonDominatedPoints) {
  // Concurrency up: throughput up, per-user speed down, until overload (last point) loses both.
  const std::vector<XY> points = {{100, 10}, {90, 30}, {70, 50}, {40, 60}, {35, 55}, {40, 60}};
  const auto frontier = ParetoFrontier(points);
  EXPECT_EQ(frontier, (std::vector<size_t>{3, 2, 1, 0}));  // ascending x; duplicate kept once
  EXPECT_TRUE(ParetoFrontier({}).empty());
  EXPECT_EQ(ParetoFrontier({{std::nan(""), 1}, {1, 1}}), (std::vector<size_t>{1}));
}

TEST(ReportCurves, SaturatingCurveHasItsKneeWhereGainsFallBelowTenPercentPerDoubling) {
  // Throughput doubles with concurrency up to 16, then sits at 1600 (a hard ceiling).
  std::vector<double> t;
  for (double level : kLevels) t.push_back(100 * std::min(level, 16.0));
  const Knee knee = FindKnee(kLevels, t);
  ASSERT_TRUE(knee.found) << knee.reason;
  EXPECT_DOUBLE_EQ(knee.level, 16);
  EXPECT_EQ(knee.index, 4u);
  EXPECT_DOUBLE_EQ(knee.throughput, 1600);
}

TEST(ReportCurves, SmoothSaturationKneeIsTheFirstLevelAfterWhichGrowthStaysSlow) {
  // T = 1000 L / (L + 4): gains per doubling 67%, 50%, 33%, 20%, 11%, 6%, 3% -> knee at 32: the
  // step 16 -> 32 still gains 11%, and no level after 32 gains more than 10% per doubling.
  std::vector<double> t;
  for (double level : kLevels) t.push_back(1000 * level / (level + 4));
  const Knee knee = FindKnee(kLevels, t);
  ASSERT_TRUE(knee.found) << knee.reason;
  EXPECT_DOUBLE_EQ(knee.level, 32);
}

TEST(ReportCurves, LinearCurveHasNoKnee) {
  std::vector<double> t;
  for (double level : kLevels) t.push_back(50 * level);
  const Knee knee = FindKnee(kLevels, t);
  EXPECT_FALSE(knee.found);
  EXPECT_NE(knee.reason.find("still climbing 100% per doubling"), std::string::npos) << knee.reason;
}

TEST(ReportCurves, NoiseDoesNotMoveTheKnee) {
  // The hard ceiling at 16 with +-4% noise (deterministic): a dip at 32 and a bump at 64 stay
  // within the allowance, and an early dip (at 4) is no knee because 8 climbs well past it.
  const std::vector<double> noise = {1.02, 0.97, 0.90, 1.03, 0.98, 0.96, 1.04, 0.99};
  std::vector<double> t;
  for (size_t i = 0; i < kLevels.size(); ++i)
    t.push_back(100 * std::min(kLevels[i], 16.0) * noise[i]);
  const Knee knee = FindKnee(kLevels, t);
  ASSERT_TRUE(knee.found) << knee.reason;
  EXPECT_DOUBLE_EQ(knee.level, 16);
}

TEST(ReportCurves, CollapsingCurveKneesAtItsPeakAndTooFewLevelsHaveNone) {
  const std::vector<double> levels = {1, 2, 4, 8};
  const Knee knee = FindKnee(levels, {100, 200, 380, 250});
  ASSERT_TRUE(knee.found);
  EXPECT_DOUBLE_EQ(knee.level, 4);
  EXPECT_FALSE(FindKnee({1}, {100}).found);
  // A custom allowance: at 50% per doubling the 1 -> 2 -> 4 steps (+100%, +90%) still count.
  EXPECT_DOUBLE_EQ(FindKnee(levels, {100, 200, 380, 250}, 0.5).level, 4);
}

Curve SloCurve(const std::vector<double>& attainment, const std::vector<double>& throughput) {
  std::vector<CurveRun> runs;
  for (size_t i = 0; i < attainment.size(); ++i) {
    runs.push_back({"c", kLevels[i], {{"output_throughput", throughput[i]}}, attainment[i]});
  }
  return BuildCurves(runs).at(0);
}

TEST(ReportCurves, BestSloPointIsTheHighestThroughputThatStillMeetsTheSlo) {
  // Attainment falls with load; 8 is the last level at >= 90%.
  const Curve curve = SloCurve({1, 1, 0.97, 0.91, 0.6, 0.2}, {100, 190, 350, 600, 900, 950});
  const SloPoint best = FindBestSloPoint(curve, "output_throughput");
  ASSERT_TRUE(best.found) << best.reason;
  EXPECT_DOUBLE_EQ(best.level, 8);
  EXPECT_DOUBLE_EQ(best.throughput, 600);
}

TEST(ReportCurves, SloNeverMetAlwaysMetAndAbsent) {
  const SloPoint never =
      FindBestSloPoint(SloCurve({0.5, 0.4, 0.1}, {100, 200, 300}), "output_throughput");
  EXPECT_TRUE(never.has_slo);
  EXPECT_FALSE(never.found);
  EXPECT_NE(never.reason.find("best attainment 0.50"), std::string::npos) << never.reason;

  // Always met: the highest-throughput level, even when it is not the highest level.
  const SloPoint always =
      FindBestSloPoint(SloCurve({1, 1, 0.99, 0.95}, {100, 200, 420, 400}), "output_throughput");
  ASSERT_TRUE(always.found);
  EXPECT_DOUBLE_EQ(always.level, 4);

  std::vector<CurveRun> runs = {{"c", 1, {{"output_throughput", 10}}, std::nullopt}};
  const SloPoint none = FindBestSloPoint(BuildCurves(runs)[0], "output_throughput");
  EXPECT_FALSE(none.has_slo);
  EXPECT_EQ(none.reason, "no SLO in the matrix");
}

TEST(ReportCurves, EveryRepeatOfALevelMustMeetTheSlo) {
  std::vector<CurveRun> runs = {
      {"c", 1, {{"output_throughput", 100}}, 0.99},
      {"c", 2, {{"output_throughput", 200}}, 0.95},
      {"c", 2, {{"output_throughput", 210}}, 0.85},  // one repeat misses: level 2 does not count
  };
  const SloPoint best = FindBestSloPoint(BuildCurves(runs)[0], "output_throughput");
  ASSERT_TRUE(best.found);
  EXPECT_DOUBLE_EQ(best.level, 1);
}

TEST(ReportCurves, AttainmentCountsFailedRequestsAsMisses) {
  // goodput 9/s over 10 s = 90 good of 95 completed + 5 failed.
  EXPECT_DOUBLE_EQ(*SloAttainment(9, 10, 95, 5), 0.9);
  EXPECT_FALSE(SloAttainment(std::nan(""), 10, 95, 5).has_value());
  EXPECT_FALSE(SloAttainment(1, 10, 0, 0).has_value());
}

}  // namespace
}  // namespace servesweep::report
