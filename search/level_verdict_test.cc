#include "search/level_verdict.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::search {
namespace {

SearchSpec TwoConstraints() {
  SearchSpec spec;
  spec.constraints = {{"ttft_p90_ms", true, 2000}, {"decode_median_tok_per_s", false, 150}};
  spec.noise_pct = 5;
  return spec;
}

TEST(LevelVerdict, MeetsWhenEveryFigureIsInsideItsLimit) {
  const auto v =
      JudgeLevel(TwoConstraints(), {{"ttft_p90_ms", 1000}, {"decode_median_tok_per_s", 200}});
  EXPECT_TRUE(v.meets);
  EXPECT_FALSE(v.close);
  // The nearest one binds: TTFT 50% inside, decode 33% inside.
  EXPECT_EQ(v.binding, "decode_median_tok_per_s");
  EXPECT_NEAR(v.margin_pct, 100.0 / 3, 1e-9);
}

TEST(LevelVerdict, TheViolatedConstraintBinds) {
  const auto v =
      JudgeLevel(TwoConstraints(), {{"ttft_p90_ms", 2500}, {"decode_median_tok_per_s", 200}});
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.binding, "ttft_p90_ms");
  EXPECT_NEAR(v.margin_pct, -25, 1e-9);
}

TEST(LevelVerdict, AtTheLimitMeetsAndWithinNoiseIsClose) {
  auto v = JudgeLevel(TwoConstraints(), {{"ttft_p90_ms", 2000}, {"decode_median_tok_per_s", 300}});
  EXPECT_TRUE(v.meets);
  EXPECT_TRUE(v.close);
  v = JudgeLevel(TwoConstraints(), {{"ttft_p90_ms", 2099}, {"decode_median_tok_per_s", 300}});
  EXPECT_FALSE(v.meets);
  EXPECT_TRUE(v.close);
  v = JudgeLevel(TwoConstraints(), {{"ttft_p90_ms", 2101}, {"decode_median_tok_per_s", 300}});
  EXPECT_FALSE(v.close);
}

TEST(LevelVerdict, AMissingFigureNeverMeets) {
  const auto v = JudgeLevel(TwoConstraints(), {{"ttft_p90_ms", 10}});
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.missing, "decode_median_tok_per_s");
  EXPECT_FALSE(
      JudgeLevel(TwoConstraints(), {{"ttft_p90_ms", NAN}, {"decode_median_tok_per_s", 300}}).meets);
}

TEST(LevelVerdict, ObjectiveValues) {
  const Figures f = {{"output_throughput_per_gpu", 900}, {"goodput", 12}, {"gpu_count", 4}};
  EXPECT_EQ(ObjectiveValue(Objective::kMaxOutputTokPerSPerGpu, f), 900);
  EXPECT_EQ(ObjectiveValue(Objective::kMaxGoodputPerGpu, f), 3);
  EXPECT_TRUE(std::isnan(ObjectiveValue(Objective::kMinCostPerMOutputTok, f)));
  EXPECT_TRUE(Better(Objective::kMaxGoodputPerGpu, 3, 2));
  EXPECT_TRUE(Better(Objective::kMinCostPerMOutputTok, 2, 3));
  EXPECT_TRUE(Better(Objective::kMaxGoodputPerGpu, 1, NAN));
  EXPECT_FALSE(Better(Objective::kMaxGoodputPerGpu, NAN, 1));
}

}  // namespace
}  // namespace servesweep::search
