// End-to-end: `servesweep compare` over the results databases of real sweeps (coordinator,
// agent and emulator as processes), matched and unmatched.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/net.h"
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

  // --include-invalid: this test is about matching and verdicts; a run a noisy machine makes
  // client-bound (a read lag over the 2 ms floor) must not drop a repeat here. Leaving
  // uncertified runs out is tested in certified_runs_e2e_test.cc.
  std::string text;
  ASSERT_EQ(RunServesweep(fmt::format("compare {} {} --include-invalid", fast, slow), &text), 0)
      << text;
  EXPECT_NE(text.find("matched: every condition"), std::string::npos) << text;
  EXPECT_NE(text.find("varied: sim.ttft_ms"), std::string::npos) << text;
  EXPECT_NE(text.find("== concurrency 1:"), std::string::npos) << text;
  EXPECT_NE(text.find("== concurrency 2:"), std::string::npos) << text;

  std::string json_text;
  ASSERT_EQ(
      RunServesweep(fmt::format("compare {} {} --json --include-invalid", fast, slow), &json_text),
      0);
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

// examples/self-hosted-vs-managed.yaml as shipped, its managed side pointed at a second emulator
// that wants an API key (and sheds a few requests): the same requests on both sides, priced per
// GPU hour and per token, compared on cost, latency percentiles and success rate.
TEST(CompareEndToEnd, SelfHostedAndManagedServeTheSameRequestsComparedOnCost) {
  Harness h("self-hosted-vs-managed");
  const uint16_t port = FreeLoopbackPort();
  const std::string key_file = h.WriteFile("managed.key", "sk-e2e-managed\n");
  h.Start("managed", {"sim", "--port", std::to_string(port), "--model",
                      "deepseek-ai/deepseek-v4.1-flash", "--ttft-ms", "300", "--itl-ms", "12",
                      "--api-key-file", key_file, "--fault-error-rate", "0.05"});
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  ASSERT_TRUE(Harness::WaitForHealthy(url));

  std::ifstream in(SERVESWEEP_SOURCE_DIR "/examples/self-hosted-vs-managed.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace("base_url: http://127.0.0.1:8100/v1", "base_url: " + url + "/v1");
  const std::string matrix = h.WriteFile("self-hosted-vs-managed.yaml", text);
  const std::string out = h.Path("out");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, out), &output), 0) << output;

  // The same prompts in the same order: every request both sides answered had the same length.
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM requests a JOIN runs ra ON a.run_id = ra.run_id "
                       "JOIN requests b ON a.idx = b.idx JOIN runs rb ON b.run_id = rb.run_id "
                       "WHERE ra.idx = 0 AND rb.idx = 1 AND a.success AND b.success "
                       "AND a.prompt_tokens != b.prompt_tokens"),
            0);
  EXPECT_GT(h.QueryInt(out,
                       "SELECT COUNT(*) FROM requests a JOIN requests b ON a.idx = b.idx "
                       "AND a.run_id < b.run_id WHERE a.success AND b.success"),
            30);
  const auto rows =
      h.Query(out,
              "SELECT engine, gpu_count, duration_s, completed, failed, success_rate, "
              "total_input_tokens, total_output_tokens, cost_per_completed_request, "
              "cost_per_mtok_output, ttft_p99_ms, e2el_p99_ms FROM results "
              "ORDER BY engine DESC");
  ASSERT_EQ(rows.rows.size(), 2u) << output;
  auto number = [&](size_t row, size_t column) { return std::stod(rows.rows[row][column]); };
  ASSERT_EQ(rows.rows[0][0], "sim");
  ASSERT_EQ(rows.rows[1][0], "external");
  // Self-hosted: 4 GPUs x the measured phase x 3.5 per GPU hour, over the completed requests.
  const double self_hosted_cost = 3.5 * number(0, 1) * number(0, 2) / 3600;
  EXPECT_NEAR(number(0, 8), self_hosted_cost / number(0, 3), 1e-12);
  EXPECT_NEAR(number(0, 9), self_hosted_cost / number(0, 7) * 1e6, 1e-9);
  // Managed: the completed requests' tokens at 0.30 / 1.20 per million (no cached tokens known).
  const double managed_cost = (number(1, 6) * 0.30 + number(1, 7) * 1.20) / 1e6;
  EXPECT_NEAR(number(1, 8), managed_cost / number(1, 3), 1e-12);
  EXPECT_NEAR(number(1, 9), managed_cost / number(1, 7) * 1e6, 1e-9);
  EXPECT_EQ(number(0, 4), 0);  // the self-hosted side sheds nothing
  EXPECT_GT(number(1, 4), 0);  // the managed side shed some, and says how many
  EXPECT_NEAR(number(1, 5), number(1, 3) / (number(1, 3) + number(1, 4)), 1e-12);
  EXPECT_GT(number(1, 10), 300);  // its first token comes 300 ms after the request

  // One comparison group (the zip moves engine, layout and price together), with the costs, the
  // percentiles and the success rate, and the note that the managed side's GPUs are not known.
  // A busy test machine can make the self-hosted run client-bound: include it either way.
  ASSERT_EQ(RunServesweep(fmt::format("report {} --include-invalid", out), &output), 0) << output;
  std::ifstream report_in(out + "/report.md");
  const std::string report((std::istreambuf_iterator<char>(report_in)),
                           std::istreambuf_iterator<char>());
  const size_t groups = report.find("## Comparison groups");
  ASSERT_NE(groups, std::string::npos) << report;
  const std::string section = report.substr(groups);
  EXPECT_EQ(section.find("### "), section.rfind("### ")) << section;  // one group
  EXPECT_NE(section.find("| configuration | success_rate | ttft_median_ms | ttft_p99_ms | "
                         "tpot_median_ms | e2el_median_ms | e2el_p99_ms | "
                         "cost_per_completed_request | cost_per_mtok_output |"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("engine=sim"), std::string::npos) << section;
  EXPECT_NE(section.find("engine=external"), std::string::npos) << section;
  EXPECT_NE(section.find("Varied: engine."), std::string::npos) << section;
  EXPECT_NE(section.find("Note: gpus.count differs ('4' vs '1'): B is a managed endpoint"),
            std::string::npos)
      << section;
}

}  // namespace
}  // namespace servesweep::testing
