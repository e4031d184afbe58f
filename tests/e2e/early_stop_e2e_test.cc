// End-to-end: early stop over the real processes (`servesweep run`: a coordinator, a local agent,
// the emulator serving the performance model with 4 sequences at most). A steady closed loop
// stops once stable, near its minimum count; a rate ladder stops the level whose queue keeps
// growing, records why, and skips the levels above it without running them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Llama-3.1-8B on an emulated H200, at most 4 sequences in a batch: a few requests a second.
constexpr const char* kEngine = R"(engine: sim
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h200, model_profile: llama-3.1-8b, startup_ms: 100}
engine_config: {max_num_seqs: 4}
local: {agents: 1, gpus_per_agent: 1}
)";

TEST(EarlyStop, AStableRunStopsNearItsMinimumCountAndSaysWhy) {
  Harness h("early_stop_stable");
  const std::string matrix = h.WriteFile("m.yaml", fmt::format(R"(name: stable
{}workload:
  input_len: 64
  output_len: 16
  num_requests: 5000
  warmup_requests: 4
  concurrency: 4
  early_stop: {{stable: {{tolerance_pct: 10, window_requests: 10, min_requests: 60}}}}
)",
                                                               kEngine));
  std::string output;
  ASSERT_EQ(
      RunServesweep(fmt::format("run {} --out {} --progress off", matrix, h.Path("out")), &output),
      0)
      << output;
  const auto row =
      h.Query(h.Path("out"), "SELECT stopped, completed, stop_evidence, validity FROM results")
          .rows;
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0][0], "stable") << row[0][2];
  const int completed = std::stoi(row[0][1]);
  EXPECT_GE(completed, 60);
  // Stable at the first judgement here: 60 and the 4 in flight (bench/early_stop.sh measures
  // how near the minimum count it stops); a loaded machine may need a few more windows.
  EXPECT_LE(completed, 300);
  EXPECT_EQ(row[0][3], "valid");
  const std::string report = ReadTextFile(h.Path("out") + "/report.md");
  EXPECT_NE(report.find("## Early stops"), std::string::npos) << report;
  EXPECT_NE(report.find("stopped: stable after"), std::string::npos) << report;
}

TEST(EarlyStop, AnOversaturatedLevelStopsAndTheLevelsAboveItAreSkipped) {
  Harness h("early_stop_ladder");
  // About 11 requests/s of capacity: 2/s runs its length, 40/s is over-saturated, 80/s and 160/s
  // are never run.
  const std::string matrix = h.WriteFile("m.yaml", fmt::format(R"(name: ladder
{}workload:
  input_len: 64
  output_len: 64
  num_requests: 600
  early_stop: {{oversaturated: {{min_s: 3, window_s: 6}}}}
  drain_timeout_s: 3
zip:
  - request_rate: [2, 40, 80, 160]
    num_requests: [8, 900, 900, 900]
)",
                                                               kEngine));
  std::string output;
  ASSERT_EQ(
      RunServesweep(fmt::format("run {} --out {} --progress off", matrix, h.Path("out")), &output),
      0)
      << output;
  EXPECT_NE(output.find("2 skipped"), std::string::npos) << output;
  const auto rows = h.Query(h.Path("out"),
                            "SELECT runs.status, IFNULL(stopped, ''), IFNULL(stopped_at_s, 0), "
                            "IFNULL(result_status, ''), runs.last_error, "
                            "IFNULL(stop_evidence, '') FROM runs LEFT JOIN results "
                            "USING(run_id) ORDER BY runs.idx")
                        .rows;
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0][0], "done");
  EXPECT_EQ(rows[0][1], "");  // ran its length
  EXPECT_EQ(rows[1][0], "done");
  EXPECT_EQ(rows[1][1], "oversaturated") << rows[1][5];
  EXPECT_GE(std::stod(rows[1][2]), 3.0);
  EXPECT_LT(std::stod(rows[1][2]), 10.0);
  EXPECT_NE(rows[1][5].find("requests in flight grew"), std::string::npos) << rows[1][5];
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(rows[i][0], "skipped") << i;
    EXPECT_EQ(rows[i][3], "skipped") << i;
    EXPECT_NE(rows[i][4].find("request_rate 40/s"), std::string::npos) << rows[i][4];
  }
  // Skipped runs sent nothing.
  EXPECT_EQ(h.QueryInt(h.Path("out"),
                       "SELECT COUNT(*) FROM requests JOIN runs USING(run_id) WHERE "
                       "runs.status = 'skipped'"),
            0);
  const std::string report = ReadTextFile(h.Path("out") + "/report.md");
  EXPECT_NE(report.find("2 skipped (a lower load level over-saturated)"), std::string::npos)
      << report;
  EXPECT_NE(report.find("stopped: oversaturated after"), std::string::npos) << report;
  // A resumed sweep keeps them skipped: nothing is left to run.
  ASSERT_EQ(
      RunServesweep(fmt::format("run {} --out {} --progress off --resume", matrix, h.Path("out")),
                    &output),
      0)
      << output;
  EXPECT_EQ(h.QueryInt(h.Path("out"), "SELECT COUNT(*) FROM runs WHERE status = 'skipped'"), 2);
}

}  // namespace
}  // namespace servesweep::testing
