#include "loadgen/arrival_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace servesweep::loadgen {
namespace {

TEST(PoissonSchedule, MeanGapWithinThreePercent) {
  const double rate = 50;
  auto t = PoissonScheduleNs(10'001, rate, 7);
  ASSERT_EQ(t.size(), 10'001u);
  EXPECT_EQ(t[0], 0);
  double mean_gap_s = static_cast<double>(t.back()) / 1e9 / 10'000;
  EXPECT_NEAR(mean_gap_s, 1 / rate, 0.03 / rate);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
}

TEST(PoissonSchedule, SeededAndDeterministic) {
  EXPECT_EQ(PoissonScheduleNs(100, 10, 1), PoissonScheduleNs(100, 10, 1));
  EXPECT_NE(PoissonScheduleNs(100, 10, 1), PoissonScheduleNs(100, 10, 2));
}

TEST(PoissonSchedule, AbsoluteNoDriftAccumulation) {
  // Every t_i is the rounded exact sum of the first i gaps from the same generator: rounding
  // errors do not add up, and the last arrival is exactly where the gaps put it.
  const double rate = 3;
  auto t = PoissonScheduleNs(10'000, rate, 99);
  std::mt19937_64 rng(99);
  long double exact_s = 0;
  for (size_t i = 1; i < t.size(); ++i) {
    exact_s += ExponentialGapS(rng(), rate);
    ASSERT_LE(std::fabs(static_cast<long double>(t[i]) - exact_s * 1e9), 5.0L) << i;
  }
}

TEST(PoissonSchedule, InfiniteRateSendsAllAtOnce) {
  auto t = PoissonScheduleNs(5, std::numeric_limits<double>::infinity(), 1);
  EXPECT_EQ(t, std::vector<int64_t>(5, 0));
}

TEST(ExponentialGap, KnownValues) {
  // All-ones bits give u = 1 -> gap 0; zero bits give u = 2^-53 -> 53 ln 2 / rate.
  EXPECT_DOUBLE_EQ(ExponentialGapS(~0ull, 2), 0.0);
  EXPECT_NEAR(ExponentialGapS(0, 1), 53 * std::log(2.0), 1e-12);
}

}  // namespace
}  // namespace servesweep::loadgen

namespace servesweep::loadgen {
namespace {

// Mean and coefficient of variation of the gaps of a schedule.
std::pair<double, double> GapMeanAndCv(const std::vector<int64_t>& schedule) {
  double sum = 0, sum_sq = 0;
  const size_t n = schedule.size() - 1;
  for (size_t i = 1; i < schedule.size(); ++i) {
    const double gap = static_cast<double>(schedule[i] - schedule[i - 1]) / 1e9;
    sum += gap;
    sum_sq += gap * gap;
  }
  const double mean = sum / n;
  return {mean, std::sqrt(sum_sq / n - mean * mean) / mean};
}

TEST(GammaSchedule, KeepsTheRateAndSetsTheBurstiness) {
  for (double burstiness : {0.25, 0.5, 2.0, 4.0}) {
    const auto schedule = GammaScheduleNs(40001, 10.0, burstiness, 7);
    const auto [mean_s, cv] = GapMeanAndCv(schedule);
    EXPECT_NEAR(mean_s, 0.1, 0.1 * 0.03) << burstiness;
    EXPECT_NEAR(cv, 1.0 / std::sqrt(burstiness), 0.05 / std::sqrt(burstiness)) << burstiness;
  }
  // Burstiness 1 is exactly the Poisson schedule; the same seed gives the same schedule.
  EXPECT_EQ(GammaScheduleNs(100, 5.0, 1.0, 3), PoissonScheduleNs(100, 5.0, 3));
  EXPECT_EQ(GammaScheduleNs(100, 5.0, 0.3, 3), GammaScheduleNs(100, 5.0, 0.3, 3));
}

}  // namespace
}  // namespace servesweep::loadgen
