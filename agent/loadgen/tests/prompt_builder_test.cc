#include "agent/loadgen/prompt_builder.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(first4.size(), 5000u);   // distinct within the first words: no shared prefix block
}

}  // namespace
}  // namespace servesweep::loadgen
