// End-to-end: `servesweep compare` over the results databases of real sweeps (coordinator,
// agent and emulator as processes), matched and unmatched.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Two concurrency levels, two repeats each; only the emulator's timing and the output length vary.
std::string Sweep(Harness& h, const std::string& name, double ttft_ms, int output_len) {
  const std::string matrix = h.WriteFile(
      name + ".yaml", SimMatrix(name, 2, 6, 1, output_len, ttft_ms, 1) + "repeats: 2\n");
  const std::string out = h.Path(name);
  std::string output;
  EXPECT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, out), &output), 0) << output;
  return out;
}

TEST(CompareEndToEnd, MatchedSweepsCompareAndUnmatchedOnesAreRefused) {
  Harness h("compare");
  const std::string fast = Sweep(h, "fast", 5, 4);
  const std::string slow = Sweep(h, "slow", 60, 4);
  const std::string longer = Sweep(h, "longer", 5, 8);

  std::string text;
  ASSERT_EQ(RunServesweep(fmt::format("compare {} {}", fast, slow), &text), 0) << text;
  EXPECT_NE(text.find("matched: every condition"), std::string::npos) << text;
  EXPECT_NE(text.find("varied: sim.ttft_ms"), std::string::npos) << text;
  EXPECT_NE(text.find("== concurrency 1:"), std::string::npos) << text;
  EXPECT_NE(text.find("== concurrency 2:"), std::string::npos) << text;

  std::string json_text;
  ASSERT_EQ(RunServesweep(fmt::format("compare {} {} --json", fast, slow), &json_text), 0);
  const auto json = nlohmann::json::parse(json_text);
  EXPECT_TRUE(json["matched"].get<bool>());
  ASSERT_EQ(json["pairs"].size(), 2u);
  for (const auto& pair : json["pairs"]) {
    for (const auto& f : pair["figures"]) {
      if (f["column"] != "ttft_median_ms") continue;
      // Two repeats each side; the emulator's first token comes 55 ms later in B.
      EXPECT_EQ(f["a"]["runs"], 2);
      EXPECT_EQ(f["b"]["runs"], 2);
      EXPECT_GT(f["b"]["median"].get<double>() - f["a"]["median"].get<double>(), 40);
      EXPECT_EQ(f["verdict"], "B worse");
    }
  }

  std::string refused;
  EXPECT_EQ(RunServesweep(fmt::format("compare {} {}", fast, longer), &refused), 1) << refused;
  EXPECT_NE(refused.find("refusing an unmatched comparison"), std::string::npos) << refused;
  EXPECT_NE(refused.find("workload.output_len: 'fixed:4' vs 'fixed:8'"), std::string::npos)
      << refused;
  std::string allowed;
  ASSERT_EQ(RunServesweep(fmt::format("compare {} {} --allow-mismatch", fast, longer), &allowed),
            0);
  EXPECT_EQ(allowed.rfind("UNMATCHED comparison", 0), 0u) << allowed;

  std::string missing;
  EXPECT_EQ(RunServesweep(fmt::format("compare {} {}", fast, h.Path("nowhere")), &missing), 1);
  EXPECT_NE(missing.find("expected a sweep's results database, found none"), std::string::npos);
}

TEST(CompareEndToEnd, ReportShowsComparisonGroupsAgainstTheBaseline) {
  Harness h("compare-groups");
  const std::string matrix = h.WriteFile("groups.yaml", R"(name: groups
engine: sim
model: test-model
workload: {input_len: 16, output_len: 4, num_requests: 6, warmup_requests: 1}
repeats: 2
axes:
  sim: [{ttft_ms: 5, itl_ms: 1}, {ttft_ms: 50, itl_ms: 1}]
  concurrency: [1, 2]
compare: [sim]
)");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, h.Path("out")), &output), 0)
      << output;
  const std::string report = ReadTextFile(h.Path("out") + "/report.md");
  EXPECT_NE(report.find("## Comparison groups"), std::string::npos) << report;
  for (const char* group : {"### concurrency=1", "### concurrency=2"}) {
    const size_t at = report.find(group);
    ASSERT_NE(at, std::string::npos) << report;
    const std::string section = report.substr(at, report.find("###", at + 3) - at);
    EXPECT_NE(section.find("Matched: every condition is the same. Varied: sim.ttft_ms."),
              std::string::npos)
        << section;
    EXPECT_NE(section.find("| ttft_ms=5 itl_ms=1 (baseline) |"), std::string::npos) << section;
    // The slower emulator's TTFT median is worse beyond noise (two repeats each side).
    const size_t slow = section.find("| ttft_ms=50 itl_ms=1 |");
    ASSERT_NE(slow, std::string::npos) << section;
    EXPECT_NE(section.find("worse", slow), std::string::npos) << section;
  }
}

}  // namespace
}  // namespace servesweep::testing
