#include "loadgen/prompt_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

namespace servesweep::loadgen {
namespace {

std::vector<std::string> Words(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> w;
  for (std::string x; is >> x;) w.push_back(x);
  return w;
}

TEST(PromptBuilder, ExactWordCountSingleSpaces) {
  for (uint32_t len : {1u, 2u, 4u, 5u, 128u, 1000u}) {
    std::string p = BuildPrompt(3, 17, len);
    EXPECT_EQ(Words(p).size(), len);
    EXPECT_EQ(p.find("  "), std::string::npos);
    EXPECT_NE(p.front(), ' ');
    EXPECT_NE(p.back(), ' ');
  }
}

TEST(PromptBuilder, SeededAndDistinct) {
  EXPECT_EQ(BuildPrompt(1, 5, 64), BuildPrompt(1, 5, 64));
  EXPECT_NE(BuildPrompt(1, 5, 64), BuildPrompt(2, 5, 64));
  std::set<std::string> seen, first4;
  for (uint64_t i = 0; i < 5000; ++i) {
    std::string p = BuildPrompt(1, i, 32);
    seen.insert(p);
    auto w = Words(p);
    first4.insert(w[0] + " " + w[1] + " " + w[2] + " " + w[3]);
  }
  EXPECT_EQ(seen.size(), 5000u);
  EXPECT_EQ(first4.size(), 5000u);  // distinct within the first words: no shared prefix block
}

TEST(PromptBuilder, SharedPrefixBlocksGiveEqualLeadingTokensThenTheRequestsOwn) {
  const std::vector<uint64_t> group_a = {11, 12}, group_b = {21, 22};
  // 700 shared tokens (one full block and 188 of the next), then each request's own.
  const auto a0 = Words(BuildPrompt(1, 0, 900, {&group_a, 700}));
  const auto a1 = Words(BuildPrompt(7, 5, 800, {&group_a, 700}));
  const auto b0 = Words(BuildPrompt(1, 0, 900, {&group_b, 700}));
  ASSERT_EQ(a0.size(), 900u);
  ASSERT_EQ(a1.size(), 800u);
  EXPECT_TRUE(std::equal(a0.begin(), a0.begin() + 700, a1.begin()));  // seed and index aside
  EXPECT_NE(std::vector<std::string>(a0.begin() + 700, a0.begin() + 704),
            std::vector<std::string>(a1.begin() + 700, a1.begin() + 704));
  EXPECT_FALSE(std::equal(a0.begin(), a0.begin() + 16, b0.begin()));  // another group's prefix
  // Token ids the same way, and a prefix longer than the prompt is clipped to it.
  const auto ids0 = BuildPromptTokenIds(1, 0, 600, {&group_a, 512});
  const auto ids1 = BuildPromptTokenIds(2, 9, 600, {&group_a, 512});
  EXPECT_TRUE(std::equal(ids0.begin(), ids0.begin() + 512, ids1.begin()));
  EXPECT_NE(ids0[512], ids1[512]);
  EXPECT_EQ(BuildPromptTokenIds(1, 0, 100, {&group_a, 700}).size(), 100u);
  // Without a prefix, the prompt is exactly what it always was.
  EXPECT_EQ(BuildPrompt(3, 4, 50, {}), BuildPrompt(3, 4, 50));
}

}  // namespace
}  // namespace servesweep::loadgen
