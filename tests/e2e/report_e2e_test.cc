// End-to-end: the reports of real sweeps (`plan --simulate` through the performance model, and
// `servesweep run` on the emulator): knee, best SLO point, cost and diagnosis in report.md, the
// same in report.html with every plot, and text from the matrix escaped in the HTML.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Llama 3.1 70B at fp8 on one simulated H200: throughput saturates past concurrency 64 (only
// 128 requests), TTFT grows with the uniform prompt lengths, and the 800 ms TTFT limit (p99: a
// 4096-token prompt alone takes about 0.6 s) holds only at low load. An engine version carrying
// markup names both configurations.
const char* kSaturating = R"(name: report
engine: sim
model: meta-llama/Llama-3.1-70B-Instruct
precision: fp8
sim: {hardware: h200}
workload:
  input_len: {distribution: uniform, low: 128, high: 4096}
  output_len: 128
  num_requests: 128
  seed: 3
slo: {ttft_ms: 800, tpot_ms: 40}
engine_config: {price: {gpu_hour: 3.5, currency: USD}}
axes:
  engine_version: ["<img src=x onerror=alert(1)>", "v2"]
  concurrency: [1, 4, 16, 64, 256]
)";

TEST(Report, SimulatedSweepHasKneeSloPointCostDiagnosisAndEscapedHtml) {
  Harness h("report-simulated");
  const std::string matrix = h.WriteFile("report.yaml", kSaturating);
  const std::string out = h.Path("out");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --simulate --out {}", matrix, out), &output), 0)
      << output;
  const std::string md = ReadTextFile(out + "/report.md");
  // Knee and best SLO point for both configurations.
  EXPECT_NE(md.find("## Curves: knee and best SLO point"), std::string::npos) << md;
  EXPECT_NE(md.find("| engine_version=<img src=x onerror=alert(1)> | 1, 4, 16, 64, 256 |"),
            std::string::npos)
      << md;
  EXPECT_EQ(Count(md, "| none: still climbing"), 0u) << md;  // a knee in both
  EXPECT_EQ(Count(md, "| none: no level met"), 0u) << md;    // and a best SLO point
  // The cost of every run: one GPU at 3.5/hour over its measured window.
  EXPECT_EQ(Count(md, "1 GPU(s) x "), 10u) << md;
  // Diagnosis: prompts of 128..4096 tokens make TTFT grow with prompt length.
  EXPECT_NE(md.find("**TTFT grows with prompt length**"), std::string::npos) << md;
  EXPECT_NE(md.find("marginal prefill rate"), std::string::npos) << md;

  const std::string html = ReadTextFile(out + "/report.html");
  EXPECT_EQ(html.find("<img"), std::string::npos) << "unescaped markup in report.html";
  EXPECT_NE(html.find("engine_version=&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("id=\"simulated\""), std::string::npos);
  for (const char* plot :
       {"pareto", "ttft", "e2el", "throughput", "signals-0-kv", "signals-9-requests"}) {
    EXPECT_NE(html.find(fmt::format("data-plot=\"{}\"", plot)), std::string::npos) << plot;
  }
  EXPECT_EQ(Count(html, "class=\"mark-slo\""), 2u);
  EXPECT_GE(Count(html, "class=\"mark-knee\""), 1u);
  EXPECT_EQ(html.find("no data"), std::string::npos);
  EXPECT_NE(html.find("<h2>Diagnosis</h2>"), std::string::npos);
  EXPECT_NE(html.find("<h2>Cost</h2>"), std::string::npos);
}

TEST(Report, EmulatorRunWithSlowDecodeIsDiagnosedAndReportRewritesTheHtml) {
  Harness h("report-slow-decode");
  // 80 ms between tokens at concurrency 1: above the 50 ms threshold (no profile for the
  // emulator's GPUs), and priced as a managed API whose cached tokens are not reported.
  const std::string matrix = h.WriteFile("slow.yaml", R"(name: slow
engine: sim
model: sim-llama-3.1-8b
sim: {ttft_ms: 10, itl_ms: 80, startup_ms: 0}
workload: {input_len: 64, output_len: 6, num_requests: 6, seed: 1}
engine_config: {price: {input_per_mtok: 0.30, output_per_mtok: 1.20, cached_input_per_mtok: 0.03}}
local: {agents: 1, gpus_per_agent: 1}
concurrency: 1
)");
  const std::string out = h.Path("out");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, out), &output), 0) << output;
  std::remove((out + "/report.html").c_str());
  ASSERT_EQ(RunServesweep(fmt::format("report {}", out), &output), 0) << output;
  EXPECT_NE(output.find("html:    " + out + "/report.html"), std::string::npos) << output;
  const std::string md = ReadTextFile(out + "/report.md");
  EXPECT_NE(md.find("**Decode slow even at concurrency 1** (default): median TPOT 8"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("is above 50 ms"), std::string::npos) << md;
  // 6 requests x 64 input and 6 output tokens: (384 x 0.30 + 36 x 1.20) / 10^6 = 0.0001584,
  // 4.40 per million output tokens, 0.0000264 per request; the emulator reports no
  // prefix-cache hits for these distinct prompts, so none are charged at the cached price.
  EXPECT_NE(md.find("| default | - | 0.0002 | 4.4000 | 0.000026 |"), std::string::npos) << md;
  EXPECT_NE(md.find("input 384 tok at 0.3/Mtok"), std::string::npos) << md;
  const std::string html = ReadTextFile(out + "/report.html");
  EXPECT_NE(html.find("Decode slow even at concurrency 1"), std::string::npos);
  EXPECT_EQ(html.find("id=\"simulated\""), std::string::npos);  // measured, not simulated
}

}  // namespace
}  // namespace servesweep::testing
