// The sweep's engine check without an engine installed: what it counts, how it says so, and the
// --model-config items it refuses.
#include "engines/sweep_check.h"

#include <gtest/gtest.h>

#include "matrix/matrix_loader.h"

namespace servesweep::engines {
namespace {

TEST(SweepCheck, ModelConfigItemsAreNameEqualsDirAndOthersAreRefusedWithTheItem) {
  std::map<std::string, std::string> configs;
  ASSERT_TRUE(ParseModelConfigs({"llama-8b=/configs/llama"}, &configs).ok());
  EXPECT_EQ(configs.at("llama-8b"), "/configs/llama");
  for (const char* bad : {"llama-8b", "=/configs", "llama-8b="}) {
    const Status s = ParseModelConfigs({bad}, &configs);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::string("found '") + bad + "'"), std::string::npos)
        << s.message();
  }
}

TEST(SweepCheck, EngineProcessesWithoutAnEngineCheckAreCountedApartAndNotRendered) {
  matrix::LoadedMatrix m;
  ASSERT_TRUE(matrix::ExpandMatrix("m.yaml", R"(name: s
engine: sim
model: m
workload: {input_len: 4, output_len: 4, num_requests: 2, concurrency: 1}
axes: {concurrency: [1, 2]}
)",
                                   &m)
                  .ok());
  SweepCheck check;
  ASSERT_TRUE(CheckSweep(m.matrix(), {}, EngineCheckOptions{}, &check).ok());
  EXPECT_EQ(check.processes.size(), 2u);
  EXPECT_EQ(check.not_checked, 2u);
  EXPECT_EQ(check.accepted + check.refused + check.unavailable, 0u);
  EXPECT_TRUE(check.ok());
  EXPECT_EQ(check.Render(), "");
  EXPECT_EQ(check.Summary(),
            "engine check: 0 of 0 command line(s) accepted (2 without an engine check)");
  EXPECT_EQ(CheckSweep(m.matrix(), {"bad"}, EngineCheckOptions{}, &check).code(),
            StatusCode::kInvalidArgument);
}

TEST(SweepCheck, TheSummaryCountsEachOutcome) {
  SweepCheck check;
  check.accepted = 14;
  check.refused = 1;
  check.unavailable = 1;
  check.unproven = {"r1: vllm 0.40.0 is outside vllm-0.33.0's checked versions"};
  EXPECT_FALSE(check.ok());
  EXPECT_EQ(check.Summary(),
            "engine check: 14 of 16 command line(s) accepted (1 rejected, 1 could not be "
            "checked here, 1 run(s) unchecked)");
}

}  // namespace
}  // namespace servesweep::engines
