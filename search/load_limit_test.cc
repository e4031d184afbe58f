#include "search/load_limit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <set>

namespace servesweep::search {
namespace {

SearchSpec Spec(LoadKnob knob, double min, double max) {
  SearchSpec spec;
  spec.knob = knob;
  spec.load_min = min;
  spec.load_max = max;
  spec.precision = 0.05;
  spec.boundary_repeats = 3;
  return spec;
}

LevelVerdict Verdict(bool meets, bool close = false) {
  LevelVerdict v;
  v.meets = meets;
  v.close = close;
  v.margin_pct = meets ? 10 : -10;
  v.binding = "ttft_p90_ms";
  return v;
}

// Runs the search against a reality whose limit is `true_limit`; the objective is the level.
LoadLimitSearch Against(const SearchSpec& spec, double start, double true_limit) {
  LoadLimitSearch s(spec, start);
  for (int guard = 0; !s.done() && guard < 100; ++guard) {
    const double level = *s.Next();
    s.Record(Verdict(level <= true_limit), level);
  }
  EXPECT_TRUE(s.done());
  return s;
}

TEST(LoadLimit, ConcurrencyEndsOnAdjacentLevels) {
  for (double start : {1.0, 8.0, 37.0, 200.0, 256.0}) {
    const auto s = Against(Spec(LoadKnob::kConcurrency, 1, 256), start, 37);
    ASSERT_TRUE(s.limit()) << start;
    EXPECT_EQ(*s.limit(), 37) << start;
    EXPECT_EQ(*s.lowest_failing(), 38) << start;
    EXPECT_EQ(s.objective_at_limit(), 37);
    EXPECT_EQ(s.binding(), "ttft_p90_ms");
    // Each level once, far fewer than the 256 a scan would take.
    std::set<double> levels;
    for (const auto& m : s.measurements()) levels.insert(m.level);
    EXPECT_EQ(levels.size(), s.measurements().size()) << start;
    EXPECT_LE(s.measurements().size(), 12u) << start;
    for (const auto& m : s.measurements()) EXPECT_EQ(m.level, std::round(m.level));
  }
}

TEST(LoadLimit, ARateIsFoundWithinThePrecision) {
  const auto s = Against(Spec(LoadKnob::kRequestRate, 0.25, 64), 4, 3.3);
  ASSERT_TRUE(s.limit());
  EXPECT_LE(*s.limit(), 3.3);
  EXPECT_GT(*s.lowest_failing(), 3.3);
  EXPECT_LE(*s.lowest_failing() / *s.limit(), 1.05);
  EXPECT_NEAR(s.uncertainty(), *s.lowest_failing() / *s.limit() - 1, 1e-12);
}

TEST(LoadLimit, TheRangeEnds) {
  // Everything meets: the limit is load.max, no failing level, nothing binds.
  auto s = Against(Spec(LoadKnob::kConcurrency, 1, 64), 4, 1000);
  EXPECT_EQ(*s.limit(), 64);
  EXPECT_FALSE(s.lowest_failing());
  EXPECT_EQ(s.uncertainty(), 0);
  EXPECT_EQ(s.binding(), "");
  // Nothing meets: no limit, after load.min failed.
  s = Against(Spec(LoadKnob::kConcurrency, 2, 64), 16, 1);
  EXPECT_FALSE(s.limit());
  EXPECT_EQ(*s.lowest_failing(), 2);
  EXPECT_TRUE(std::isnan(s.objective_at_limit()));
  // A start outside the range (or none) is clamped into it.
  EXPECT_EQ(*LoadLimitSearch(Spec(LoadKnob::kConcurrency, 2, 64), 500).Next(), 64);
  EXPECT_EQ(*LoadLimitSearch(Spec(LoadKnob::kConcurrency, 2, 64), NAN).Next(), 2);
  EXPECT_EQ(*LoadLimitSearch(Spec(LoadKnob::kConcurrency, 2, 64), 7.6).Next(), 8);
}

TEST(LoadLimit, AGoodModelsBandGivesANarrowBracketAtOnce) {
  // Start at the model's limit with a 10% band: 40 meets, 44 fails, 42 fails: within 5%.
  const SearchSpec spec = Spec(LoadKnob::kConcurrency, 1, 256);
  const auto narrow = [&] {
    LoadLimitSearch s(spec, 40, 1.1);
    for (int guard = 0; !s.done() && guard < 100; ++guard) {
      const double level = *s.Next();
      s.Record(Verdict(level <= 41), level);
    }
    return s;
  }();
  EXPECT_EQ(*narrow.limit(), 40);
  EXPECT_EQ(*narrow.lowest_failing(), 42);
  EXPECT_EQ(narrow.measurements()[1].level, 44);
  EXPECT_EQ(narrow.measurements().size(), 3u);
  EXPECT_GT(Against(spec, 40, 41).measurements().size(), narrow.measurements().size());
  // Far from the truth, the steps grow (1.1, 1.21, 1.46, 2, 2, ...) and still find it.
  LoadLimitSearch far(spec, 4, 1.1);
  for (int guard = 0; !far.done() && guard < 100; ++guard) {
    const double level = *far.Next();
    far.Record(Verdict(level <= 100), level);
  }
  EXPECT_LE(*far.limit(), 100);
  EXPECT_GT(*far.lowest_failing(), 100);
  EXPECT_LE(*far.lowest_failing() / *far.limit(), 1.05);
  EXPECT_LE(far.measurements().size(), 14u);
  // A step below one concurrency still moves the level.
  LoadLimitSearch small(spec, 2, 1.1);
  small.Record(Verdict(true), 2);
  EXPECT_EQ(*small.Next(), 3);
  small.Record(Verdict(false), 3);
  EXPECT_TRUE(small.done());
}

TEST(LoadLimit, ACloseVerdictIsMeasuredAgainAndTheMajorityDecides) {
  LoadLimitSearch s(Spec(LoadKnob::kConcurrency, 1, 64), 16);
  s.Record(Verdict(true, /*close=*/true), 100);
  EXPECT_EQ(*s.Next(), 16);  // again
  s.Record(Verdict(false, true), 90);
  EXPECT_EQ(*s.Next(), 16);  // a third: the two disagree
  s.Record(Verdict(true, true), 95);
  EXPECT_EQ(*s.Next(), 32);  // meets (2 of 3): the bracket goes up
  EXPECT_EQ(*s.limit(), 16);
  EXPECT_EQ(s.objective_at_limit(), 95);  // the median of the repeats
}

TEST(LoadLimit, TwoRepeatsThatAgreeDecide) {
  LoadLimitSearch s(Spec(LoadKnob::kConcurrency, 1, 64), 16);
  s.Record(Verdict(false, true), 1);
  s.Record(Verdict(false, false), 1);
  EXPECT_EQ(*s.Next(), 8);  // failed twice: down, without a third
  EXPECT_EQ(s.measurements().size(), 2u);
}

TEST(LoadLimit, OneRepeatAllowedDecidesOnTheFirst) {
  SearchSpec spec = Spec(LoadKnob::kConcurrency, 1, 64);
  spec.boundary_repeats = 1;
  LoadLimitSearch s(spec, 16);
  s.Record(Verdict(true, true), 1);
  EXPECT_EQ(*s.Next(), 32);
}

TEST(LoadLimit, NoisyVerdictsNearTheLimitStillConverge) {
  // Reality's verdict flips near the limit: within 3% of 40 it alternates.
  SearchSpec spec = Spec(LoadKnob::kConcurrency, 1, 256);
  LoadLimitSearch s(spec, 10);
  std::deque<bool> flip = {true, false, true, false, true, false, true, false};
  for (int guard = 0; !s.done() && guard < 100; ++guard) {
    const double level = *s.Next();
    const bool near = std::abs(level / 40 - 1) <= 0.03;
    bool meets = level <= 40;
    if (near) {
      meets = flip.front();
      flip.pop_front();
      flip.push_back(meets);
    }
    s.Record(Verdict(meets, near), level);
  }
  ASSERT_TRUE(s.done());
  ASSERT_TRUE(s.limit());
  EXPECT_NEAR(*s.limit(), 40, 40 * 0.06);
}

}  // namespace
}  // namespace servesweep::search
