// Load ladders: the levels and repeats of one configuration and workload form one ladder, any
// other key another; "above" is a partial order over the load knobs. And the early_stop key,
// read with its defaults, its overrides and positioned errors.
#include "matrix/load_ladder.h"

#include <gtest/gtest.h>

#include <set>

#include "matrix/matrix_loader.h"

namespace servesweep::matrix {
namespace {

const char* kBase = R"(name: t
engine: sim
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3}
repeats: 2
)";

TEST(LoadLadder, LevelsAndRepeatsShareALadderOtherKeysDoNot) {
  LoadedMatrix m;
  const Status s = ExpandMatrix("m.yaml", std::string(kBase) + R"(compare: [layout]
axes:
  layout: [{tp: 1}, {tp: 2}]
zip:
  - concurrency: [1, 8, 64]
    num_requests: [4, 32, 256]
)",
                                &m);
  ASSERT_TRUE(s.ok()) << s.message();
  auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 12u);
  std::set<std::string> ladders;
  for (auto run : runs) ladders.insert(LoadLadderOf(run));
  EXPECT_EQ(ladders.size(), 2u);  // one per layout: levels, lengths, repeats, compare groups aside
  EXPECT_EQ(LoadLadderOf(runs[0]).rfind("ladder-", 0), 0u);
  EXPECT_EQ(LoadLadderOf(runs[0]).size(), 19u);
  for (const char* keys : {"slo: {ttft_ms: 100}\n", "sim: {itl_ms: 3}\n"}) {
    LoadedMatrix other;
    ASSERT_TRUE(
        ExpandMatrix("m.yaml", std::string(kBase) + keys + "concurrency: 1\n", &other).ok());
    EXPECT_EQ(ladders.count(LoadLadderOf(other.matrix().getRuns()[0])), 0u) << keys;
  }
}

TEST(LoadLadder, AboveIsNoLessOfEveryKnobAndMoreOfOne) {
  EXPECT_TRUE(IsAbove({8, 0, 0}, {4, 0, 0}));
  EXPECT_FALSE(IsAbove({4, 0, 0}, {4, 0, 0}));
  EXPECT_FALSE(IsAbove({4, 0, 0}, {8, 0, 0}));
  EXPECT_TRUE(IsAbove({0, 10, 0}, {0, 5, 0}));
  EXPECT_TRUE(IsAbove({0, 5, 0}, {0, 5, 32}));    // no cap is above a cap
  EXPECT_FALSE(IsAbove({0, 10, 16}, {0, 5, 0}));  // more rate, a lower cap: not comparable
  EXPECT_FALSE(IsAbove({0, 10, 0}, {16, 0, 0}));  // an open loop against a closed one
  EXPECT_FALSE(IsAbove({16, 0, 0}, {0, 10, 0}));
  EXPECT_EQ(DescribeLoadLevel({0, 12, 0}), "request_rate 12/s");
  EXPECT_EQ(DescribeLoadLevel({0, 2.5, 64}), "request_rate 2.5/s max_in_flight 64");
  EXPECT_EQ(DescribeLoadLevel({32, 0, 0}), "concurrency 32");
}

const char* kNoWorkload = R"(name: t
engine: sim
model: m
concurrency: 4
)";

TEST(EarlyStopKey, DefaultsOverridesAndPositionedErrors) {
  LoadedMatrix m;
  ASSERT_TRUE(ExpandMatrix("m.yaml",
                           std::string(kNoWorkload) +
                               R"(workload: {input_len: 10, output_len: 5, num_requests: 300,
           early_stop: {stable: true, oversaturated: {window_s: 12}, max_duration_s: 90}}
)",
                           &m)
                  .ok());
  auto stop = m.matrix().getRuns()[0].getWorkload().getEarlyStop();
  EXPECT_TRUE(stop.getStable());
  EXPECT_DOUBLE_EQ(stop.getTolerancePct(), 5);
  EXPECT_EQ(stop.getWindowRequests(), 32u);
  EXPECT_TRUE(stop.getOversaturated());
  EXPECT_DOUBLE_EQ(stop.getMinS(), 10);
  EXPECT_DOUBLE_EQ(stop.getWindowS(), 12);
  EXPECT_DOUBLE_EQ(stop.getMinGrowth(), 0.1);
  EXPECT_DOUBLE_EQ(stop.getMaxDurationS(), 90);

  struct Bad {
    const char* early_stop;
    const char* message;
  };
  for (const Bad& bad : {
           Bad{"{stabel: true}", "unknown key 'stabel' in early_stop (did you mean 'stable'?)"},
           Bad{"{stable: {windows: 1}}", "'windows'"},
           Bad{"{stable: {tolerance_pct: 150}}",
               "expected 'early_stop.stable.tolerance_pct' in (0, 100), found 150"},
           Bad{"{oversaturated: {window_s: 0}}", "window_s > 0 seconds, found 10 and 0"},
       }) {
    LoadedMatrix out;
    const Status s = ExpandMatrix("m.yaml",
                                  std::string(kNoWorkload) +
                                      "workload: {input_len: 10, output_len: 5, num_requests: 3, "
                                      "early_stop: " +
                                      bad.early_stop + "}\n",
                                  &out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad.early_stop;
    EXPECT_NE(s.message().find(bad.message), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("m.yaml:5:"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace servesweep::matrix
