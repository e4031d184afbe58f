#include "workload/prefix_hit_rate.h"

#include <gtest/gtest.h>

namespace servesweep::workload {
namespace {

TEST(PrefixHitRate, PrefixesAreWholeBlocksAndTheirSumGivesTheRate) {
  SharedPrefixPlan plan;
  ASSERT_TRUE(PlanSharedPrefix(0.5, 16, {1000, 1000}, &plan).ok());
  EXPECT_EQ(plan.prefix_len_tok, (std::vector<uint32_t>{496, 496}));  // 31 blocks of 16
  EXPECT_NEAR(plan.rate, 0.496, 1e-12);
  ASSERT_TRUE(PlanSharedPrefix(0.9, 1, {64, 64, 64}, &plan).ok());  // token-granular caches
  EXPECT_EQ(plan.prefix_len_tok, (std::vector<uint32_t>{58, 58, 58}));
  ASSERT_TRUE(PlanSharedPrefix(0, 512, {1024}, &plan).ok());
  EXPECT_EQ(plan.prefix_len_tok, (std::vector<uint32_t>{0}));
  EXPECT_EQ(plan.rate, 0);
}

TEST(PrefixHitRate, ThePromptsLastTokenIsNeverPartOfThePrefix) {
  SharedPrefixPlan plan;
  // 0.97 of 100 one-token blocks rounds to 97; 0.995 would round to the whole prompt.
  ASSERT_TRUE(PlanSharedPrefix(0.97, 1, {100}, &plan).ok());
  EXPECT_EQ(plan.prefix_len_tok[0], 97u);
  ASSERT_TRUE(PlanSharedPrefix(0.995, 1, {100}, &plan).ok());
  EXPECT_EQ(plan.prefix_len_tok[0], 99u);
}

TEST(PrefixHitRate, ARateTheBlocksCannotGiveWithinFivePointsIsRefusedSayingWhatWouldDo) {
  SharedPrefixPlan plan;
  // 512-token blocks in 1,000-token prompts: 0, 51.2% or nothing else; 0.3 is 21 points off.
  const Status s = PlanSharedPrefix(0.3, 512, {1000}, &plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("prefix_hit_rate 0.3 cannot be set within 5 points with 512-token"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("allow 51.2%"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("at least 5120 tokens"), std::string::npos) << s.message();
  // Either side of the edge: 200-token blocks in 1,000-token prompts give 0, 20, 40, ... %.
  EXPECT_TRUE(PlanSharedPrefix(0.36, 200, {1000}, &plan).ok());   // 40%: 4 points off
  EXPECT_FALSE(PlanSharedPrefix(0.34, 200, {1000}, &plan).ok());  // 40%: 6 points off
}

TEST(PrefixHitRate, ARateOutsideZeroToOneIsRefused) {
  SharedPrefixPlan plan;
  EXPECT_FALSE(PlanSharedPrefix(1.0, 1, {100}, &plan).ok());
  EXPECT_FALSE(PlanSharedPrefix(-0.1, 1, {100}, &plan).ok());
  EXPECT_FALSE(PlanSharedPrefix(0.5, 0, {100}, &plan).ok());
}

}  // namespace
}  // namespace servesweep::workload
