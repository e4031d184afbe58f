// A sweep against a frozen baseline: compared when every condition matches, a new baseline
// (with each changed field) when one does not (report/baseline_comparison.h).
#include "report/baseline_comparison.h"

#include <gtest/gtest.h>

namespace servesweep::report {
namespace {

ComparedRun MakeRun(const std::string& label, const std::string& load_point,
                    const std::string& flags, double ttft_ms,
                    const std::string& output_len = "fixed:4",
                    const std::string& revision = "main") {
  ComparedRun run;
  run.run_id = label;
  run.label = label;
  run.ok = true;
  run.conditions = {{"checkpoint.model", "m"},
                    {"checkpoint.revision", revision},
                    {"workload.output_len", output_len},
                    {"load.concurrency", load_point.substr(load_point.find(' ') + 1)}};
  run.system = {{"engine", "vllm"}, {"engine.flags", flags}};
  run.load_point = load_point;
  run.figures = {{"ttft_median_ms", ttft_ms}};
  return run;
}

const ComparedFigure& Ttft(const ComparedPair& pair) {
  for (const auto& f : pair.figures) {
    if (f.column == "ttft_median_ms") return f;
  }
  static ComparedFigure none;
  ADD_FAILURE() << "no ttft figure";
  return none;
}

std::vector<ComparedRun> Baseline() {
  return {MakeRun("c=1 repeat=0", "concurrency 1", "", 10),
          MakeRun("c=1 repeat=1", "concurrency 1", "", 12),
          MakeRun("c=1 repeat=2", "concurrency 1", "", 11)};
}

TEST(BaselineCheck, MatchedSweepIsComparedWithTheBaselinesRepeats) {
  const std::vector<ComparedRun> within = {MakeRun("c=1 repeat=0", "concurrency 1", "--x", 11.5),
                                           MakeRun("c=1 repeat=1", "concurrency 1", "--x", 12.5)};
  BaselineCheck check;
  ASSERT_TRUE(CheckAgainstBaseline(Baseline(), within, &check).ok());
  EXPECT_FALSE(check.new_baseline);
  EXPECT_TRUE(check.reason.empty());
  ASSERT_EQ(check.comparison.pairs.size(), 1u);
  const auto& ttft = Ttft(check.comparison.pairs[0]);
  EXPECT_DOUBLE_EQ(ttft.a.median, 11);  // the baseline's median over its three repeats
  EXPECT_EQ(ttft.verdict.Text(), "within noise");
  EXPECT_EQ(check.comparison.pairs[0].varied,
            std::vector<std::string>{"engine.flags: '' vs '--x'"});

  const std::vector<ComparedRun> slower = {MakeRun("c=1 repeat=0", "concurrency 1", "--x", 20),
                                           MakeRun("c=1 repeat=1", "concurrency 1", "--x", 21)};
  ASSERT_TRUE(CheckAgainstBaseline(Baseline(), slower, &check).ok());
  EXPECT_FALSE(check.new_baseline);
  EXPECT_EQ(Ttft(check.comparison.pairs[0]).verdict.Text(), "B worse");
}

TEST(BaselineCheck, ChangedWorkloadStartsANewBaseline) {
  const std::vector<ComparedRun> longer = {
      MakeRun("c=1 repeat=0", "concurrency 1", "--x", 30, "fixed:8"),
      MakeRun("c=1 repeat=1", "concurrency 1", "--x", 31, "fixed:8")};
  BaselineCheck check;
  ASSERT_TRUE(CheckAgainstBaseline(Baseline(), longer, &check).ok());
  EXPECT_TRUE(check.new_baseline);
  ASSERT_EQ(check.changes.size(), 1u);
  EXPECT_EQ(check.changes[0].name, "workload.output_len");
  EXPECT_EQ(check.reason, "workload differs (workload.output_len: fixed:4 -> fixed:8)");
}

TEST(BaselineCheck, SeveralChangedConditionsAreEachNamedOnce) {
  // Two load points, both with the changed checkpoint and workload: each change listed once.
  std::vector<ComparedRun> baseline = Baseline();
  baseline.push_back(MakeRun("c=2 repeat=0", "concurrency 2", "", 15));
  const std::vector<ComparedRun> sweep = {
      MakeRun("c=1 repeat=0", "concurrency 1", "", 10, "fixed:8", "v2"),
      MakeRun("c=2 repeat=0", "concurrency 2", "", 15, "fixed:8", "v2")};
  BaselineCheck check;
  ASSERT_TRUE(CheckAgainstBaseline(baseline, sweep, &check).ok());
  EXPECT_TRUE(check.new_baseline);
  EXPECT_EQ(check.reason,
            "checkpoint and workload differ (checkpoint.revision: main -> v2; "
            "workload.output_len: fixed:4 -> fixed:8)");
}

TEST(BaselineCheck, NoSharedLoadPointStartsANewBaseline) {
  const std::vector<ComparedRun> sweep = {MakeRun("c=8 repeat=0", "concurrency 8", "", 10)};
  BaselineCheck check;
  ASSERT_TRUE(CheckAgainstBaseline(Baseline(), sweep, &check).ok());
  EXPECT_TRUE(check.new_baseline);
  EXPECT_EQ(check.reason, "load differs (load.points: concurrency 1 -> concurrency 8)");
}

TEST(BaselineCheck, AClientBoundBaselineRepeatIsLeftOutUnlessAskedFor) {
  std::vector<ComparedRun> baseline = Baseline();
  baseline[1].client_bound = true;
  const std::vector<ComparedRun> sweep = {MakeRun("c=1 repeat=0", "concurrency 1", "", 11)};
  BaselineCheck check;
  ASSERT_TRUE(CheckAgainstBaseline(baseline, sweep, &check).ok());
  ASSERT_EQ(check.comparison.pairs.size(), 1u);
  EXPECT_EQ(Ttft(check.comparison.pairs[0]).a.runs, 2);
  RunSelection all;
  all.include_uncertified = true;
  ASSERT_TRUE(CheckAgainstBaseline(baseline, sweep, &check, all).ok());
  EXPECT_EQ(Ttft(check.comparison.pairs[0]).a.runs, 3);
  // Every repeat of a side uncertified: the pair is refused, not compared on nothing.
  for (auto& run : baseline) run.client_bound = true;
  ASSERT_TRUE(CheckAgainstBaseline(baseline, sweep, &check).ok());
  EXPECT_TRUE(check.comparison.any_refused());
}

TEST(BaselineCheck, ReasonNamesThreeGroups) {
  EXPECT_EQ(NewBaselineReason({{"checkpoint.model", "a", "b"},
                               {"gpus.model", "H100", "H200"},
                               {"slo.ttft_ms", "100", "200"}}),
            "checkpoint, gpus and slo differ (checkpoint.model: a -> b; gpus.model: H100 -> "
            "H200; slo.ttft_ms: 100 -> 200)");
}

}  // namespace
}  // namespace servesweep::report
