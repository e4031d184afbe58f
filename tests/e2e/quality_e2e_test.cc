// End-to-end: the quality gate. `servesweep run` on a matrix with an arithmetic task set and two
// emulator configurations, one answering every question right and one half of them; the
// accuracies land in the results database, and the report and `servesweep compare` flag the
// worse configuration (docs/quality.md).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int Servesweep(const std::string& args, std::string* output) {
  const int status = RunShell(fmt::format("{} {} 2>&1", ServesweepBinary(), args), output);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string QualityMatrix(const std::string& name, const std::string& accuracies, bool compare,
                          const std::string& api = "completions") {
  return fmt::format(R"(name: {}
engine: sim
model: test-model
sim: {{ttft_ms: 2, itl_ms: 1}}
workload: {{api: {}, input_len: 16, output_len: 4, num_requests: 6, warmup_requests: 1,
           concurrency: 2}}
quality: {{task_set: arithmetic, count: 40, seed: 1, margin: 0.05, max_tokens: 4}}
axes:
  sim: [{}]
{})",
                     name, api, accuracies, compare ? "compare: [sim]\n" : "");
}

TEST(QualityEndToEnd, AccuracyLandsInTheResultsAndTheGateFlagsTheWorseConfiguration) {
  Harness h("quality");
  const std::string matrix = h.WriteFile(
      "gate.yaml", QualityMatrix("gate", "{answer_accuracy: 1.0}, {answer_accuracy: 0.5}", true));
  const std::string out = h.Path("gate");
  std::string output;
  ASSERT_EQ(Servesweep(fmt::format("run {} --out {}", matrix, out), &output), 0) << output;

  const auto rows = h.Query(out,
                            "SELECT r.label, res.quality_tasks, res.quality_correct, "
                            "res.quality_accuracy, res.quality_task_set, res.completed FROM runs r "
                            "JOIN results res ON res.run_id = r.run_id ORDER BY r.idx");
  ASSERT_EQ(rows.rows.size(), 2u);
  EXPECT_EQ(rows.rows[0][1], "40");
  EXPECT_EQ(rows.rows[0][2], "40");  // answer_accuracy 1: every answer right
  EXPECT_DOUBLE_EQ(std::strtod(rows.rows[0][3].c_str(), nullptr), 1.0);
  EXPECT_EQ(rows.rows[0][4], "arithmetic (40 tasks, max_tokens 4)");
  EXPECT_EQ(rows.rows[1][1], "40");
  const double half = std::strtod(rows.rows[1][3].c_str(), nullptr);
  EXPECT_GT(half, 0.25);  // seeded: about half of 40
  EXPECT_LT(half, 0.75);
  // The quality tasks are not measured requests.
  EXPECT_EQ(rows.rows[0][5], "6");
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM requests"), 12);

  const std::string report = ReadText(out + "/report.md");
  EXPECT_NE(report.find("| accuracy |"), std::string::npos) << report;
  EXPECT_NE(report.find("1.00 (40/40)"), std::string::npos) << report;
  EXPECT_NE(report.find("## Comparison groups"), std::string::npos) << report;
  EXPECT_NE(report.find("answer_accuracy=0.5 **quality gate FAILED**"), std::string::npos)
      << report;
  EXPECT_NE(report.find(fmt::format("**quality gate FAILED: accuracy {:.2f} < baseline 1.00 - "
                                    "0.05** (its speed changes are not wins)",
                                    half)),
            std::string::npos)
      << report;

  // Across two sweeps (chat this time): `servesweep compare` says the same, and in JSON.
  const std::string good = h.Path("good"), bad = h.Path("bad");
  ASSERT_EQ(
      Servesweep(fmt::format("run {} --out {}",
                             h.WriteFile("good.yaml", QualityMatrix("good", "{answer_accuracy: 1}",
                                                                    false, "chat")),
                             good),
                 &output),
      0)
      << output;
  ASSERT_EQ(
      Servesweep(fmt::format("run {} --out {}",
                             h.WriteFile("bad.yaml", QualityMatrix("bad", "{answer_accuracy: 0.5}",
                                                                   false, "chat")),
                             bad),
                 &output),
      0)
      << output;
  std::string text;
  ASSERT_EQ(Servesweep(fmt::format("compare {} {}", good, bad), &text), 0) << text;
  EXPECT_NE(text.find("quality gate FAILED: accuracy"), std::string::npos) << text;
  EXPECT_NE(text.find("quality_accuracy"), std::string::npos) << text;
  EXPECT_EQ(text.find("B better"), std::string::npos) << text;
  std::string json_text;
  ASSERT_EQ(Servesweep(fmt::format("compare {} {} --json", good, bad), &json_text), 0);
  const auto json = nlohmann::json::parse(json_text);
  EXPECT_TRUE(json["pairs"][0]["quality_gate"]["failed"].get<bool>());
  EXPECT_DOUBLE_EQ(json["pairs"][0]["quality_gate"]["accuracy_a"].get<double>(), 1.0);
  // The same sweep against itself passes.
  ASSERT_EQ(Servesweep(fmt::format("compare {} {}", good, good), &text), 0) << text;
  EXPECT_NE(text.find("quality gate passed: accuracy 1.00 >= baseline 1.00 - 0.05"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace servesweep::testing
