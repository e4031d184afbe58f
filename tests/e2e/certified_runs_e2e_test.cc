// Certified runs (docs/metrics.md#certified-runs) end to end: a sweep of real processes (a
// coordinator, an agent, the emulator started through the template engine) in which each gate
// reason fires on the fault seeded for it and stays quiet on a clean run; the client-bound
// verdict both ways, and `compare` refusing client-bound runs; failure reasons on the console,
// in bench's JSON, in summary.csv and in report.md.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

using std::chrono::seconds;

// The emulator as a template engine with `extra` arguments, its /metrics read as vLLM's.
std::string SimEngine(const std::string& extra) {
  return fmt::format(
      R"(    - {{metrics_persona: vllm, command: ["{{servesweep}}", sim, --host, 127.0.0.1, )"
      R"(--port, "{{port}}", --model, "{{model}}", --ttft-ms, "2", --itl-ms, "2"{}]}})",
      extra);
}

// Row `idx` of results joined with runs: the named columns.
std::vector<std::string> ResultOf(Harness& h, const std::string& out, int idx,
                                  const std::string& columns) {
  const auto table = h.Query(
      out, fmt::format("SELECT {} FROM results s JOIN runs r USING(run_id) WHERE r.idx = {}",
                       columns, idx));
  return table.rows.empty() ? std::vector<std::string>{} : table.rows[0];
}

TEST(Certified, EachGateReasonFiresOnItsFaultAndACleanRunIsValid) {
  Harness h("certified-gate");
  // Run 4: the emulator dies after 12 requests and a fresh one takes its port at once (a
  // supervisor's restart): its counters start again from zero. The open loop (40/s) goes on
  // sending while it comes back, so the last scrape reads the new process.
  const std::string restart =
      R"(    - {metrics_persona: vllm, command: [sh, -c, "'{servesweep}' sim --host 127.0.0.1 )"
      R"(--port {port} --model {model} --ttft-ms 2 --itl-ms 2 --fault-crash-after 12; exec )"
      R"('{servesweep}' sim --host 127.0.0.1 --port {port} --model {model} --ttft-ms 2 )"
      R"(--itl-ms 2"]})";
  const std::string matrix = h.WriteFile(
      "m.yaml", fmt::format(R"(name: gate
engine: template
model: m
timeout_s: 60
local: {{agents: 1, gpus_per_agent: 1}}
workload: {{input_len: 8, output_len: 16, num_requests: 30, request_rate: 40, warmup_requests: 2}}
axes:
  engine_config:
{}
{}
{}
{}
{}
)",
                            SimEngine(""), SimEngine(R"(, --fault-usage-undercount-tok, "3")"),
                            SimEngine(R"(, --fault-empty-rate, "1")"),
                            SimEngine(R"(, --fault-error-rate, "0.5")"), restart));
  const std::string out = h.Path("out");
  std::string output;
  RunServesweep(fmt::format("run {} --out {} --progress off", matrix, out), &output);

  const auto clean = ResultOf(h, out, 0, "s.validity, s.validity_reasons, s.measured_scrapes");
  ASSERT_EQ(clean.size(), 3u) << output;
  EXPECT_EQ(clean[0], "valid") << clean[1];
  EXPECT_GE(std::stoi(clean[2]), 5);  // a half-second run is sampled every 50 ms

  const auto undercount = ResultOf(h, out, 1, "s.validity, s.validity_reasons, s.reconciliation");
  EXPECT_EQ(undercount[0], "invalid");
  // 32 requests (2 warm-up): usage says 13 of every 16 tokens.
  EXPECT_NE(undercount[1].find("generation tokens: the client counted 416, the engine 512"),
            std::string::npos)
      << undercount[1];

  const auto empty = ResultOf(h, out, 2, "s.validity, s.validity_reasons, s.failure_reasons");
  EXPECT_EQ(empty[0], "invalid");
  EXPECT_NE(empty[1].find("no output tokens"), std::string::npos) << empty[1];
  EXPECT_EQ(empty[2], "30 x no output tokens");

  const auto failing = ResultOf(h, out, 3, "s.validity, s.validity_reasons, s.failure_reasons");
  EXPECT_EQ(failing[0], "invalid");
  EXPECT_NE(failing[1].find("below min_success_rate 95%"), std::string::npos) << failing[1];
  EXPECT_NE(failing[2].find("x HTTP 500: Injected fault: the engine failed this request."),
            std::string::npos)
      << failing[2];

  const auto restarted = ResultOf(h, out, 4, "s.validity, s.validity_reasons, s.engine_restarts");
  EXPECT_EQ(restarted[0], "invalid");
  EXPECT_NE(restarted[1].find("the engine restarted during the run"), std::string::npos)
      << restarted[1];
  EXPECT_EQ(restarted[2], "1");

  // Invalid runs stay recorded (done, not retried), and every surface says why.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status = 'done'"), 5);
  EXPECT_EQ(h.QueryInt(out, "SELECT MAX(attempts) FROM runs"), 1);
  EXPECT_NE(output.find("every request of ["), std::string::npos) << output;
  EXPECT_NE(output.find("failed (30): 30 x no output tokens"), std::string::npos) << output;
  const std::string report = ReadTextFile(out + "/report.md");
  EXPECT_NE(report.find("## Certificates"), std::string::npos);
  EXPECT_NE(report.find("invalid: generation tokens: the client counted 416"), std::string::npos);
  EXPECT_NE(report.find("## Failure reasons"), std::string::npos);
  const std::string csv = ReadTextFile(out + "/summary.csv");
  EXPECT_NE(csv.find(",validity,"), std::string::npos);
  EXPECT_NE(csv.find("30 x no output tokens"), std::string::npos);
}

// Engine signals are scraped every 50 ms at first, so a short run has samples; one too short for
// even that is said to be so on the page instead of an empty plot.
TEST(Certified, ShortRunsAreSampledAndOneTooShortIsSaidToBe) {
  Harness h("certified-short");
  const std::string matrix = h.WriteFile("m.yaml", R"(name: short
engine: sim
model: m
sim: {ttft_ms: 1, itl_ms: 1}
axes:
  workload:
    - {input_len: 8, output_len: 4, num_requests: 2, concurrency: 2}
    - {input_len: 8, output_len: 16, num_requests: 16, concurrency: 2}
)");
  const std::string out = h.Path("out");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {} --progress off", matrix, out), &output), 0)
      << output;
  EXPECT_LT(std::stoi(ResultOf(h, out, 0, "s.measured_scrapes").at(0)), 3);
  EXPECT_GE(std::stoi(ResultOf(h, out, 1, "s.measured_scrapes").at(0)), 3);  // a ~0.15 s run
  const std::string html = ReadTextFile(out + "/report.html");
  EXPECT_NE(html.find("too short to sample"), std::string::npos);
}

// A run whose single load thread cannot keep up (the emulator answers at once on two io
// threads, 256 streams of 512 tokens: reads wait for the thread, 40-50 ms at p99 on a 2-core
// machine where one emulator thread and 64 streams left it at 9 ms, under the 10 ms limit) is
// client-bound; 16,000 requests keep its measured
// phase over the verdict's 0.5 s minimum even when the load generator has both cores (8.2M
// tokens at up to 5.3M tok/s); a slow engine at low load is not. `compare` refuses client-bound
// runs unless asked.
TEST(Certified, TheClientBoundVerdictBothWaysAndCompareRefusesClientBoundRuns) {
  Harness h("certified-client");
  const std::string sat = h.WriteFile("saturated.yaml", R"(name: saturated
engine: sim
model: m
engine_flags: [--threads, 2]
sim: {ttft_ms: 0, itl_ms: 0}
workload: {input_len: 8, output_len: 512, num_requests: 16000, concurrency: 256}
)");
  const std::string quiet = h.WriteFile("quiet.yaml", R"(name: quiet
engine: sim
model: m
sim: {ttft_ms: 5, itl_ms: 5}
workload: {input_len: 8, output_len: 16, num_requests: 40, concurrency: 2}
)");
  std::string output;
  ASSERT_EQ(
      RunServesweep(fmt::format("run {} --out {} --progress off", sat, h.Path("sat")), &output), 0)
      << output;
  const auto saturated = h.Query(h.Path("sat"),
                                 "SELECT client_bound, client_bound_reasons, load_thread_busy_max "
                                 "FROM results")
                             .rows;
  ASSERT_EQ(saturated.size(), 1u);
  EXPECT_EQ(saturated[0][0], "1") << saturated[0][1];
  // The advice follows the recorded figures (loadgen::ClientBoundReasons, tested at its edges in
  // loadgen/client_load_test.cc): the emulator shares this machine's cores with the load
  // thread, so on a loaded machine the thread waits for a core instead of working, and then
  // the advice names the machine rather than more threads (below half the 80% busy limit).
  const double busy = std::stod(saturated[0][2]);
  EXPECT_NE(saturated[0][1].find(busy >= 0.4 ? "client_threads, now 1" : "so the machine was"),
            std::string::npos)
      << busy << ": " << saturated[0][1];
  EXPECT_NE(output.find("client-bound ["), std::string::npos) << output;

  ASSERT_EQ(
      RunServesweep(fmt::format("run {} --out {} --progress off", quiet, h.Path("quiet")), &output),
      0)
      << output;
  const auto calm = h.Query(h.Path("quiet"),
                            "SELECT client_bound, client_bound_reasons, load_thread_busy_max, "
                            "read_lag_p99_ms FROM results")
                        .rows;
  ASSERT_EQ(calm.size(), 1u);
  EXPECT_EQ(calm[0][0], "0") << calm[0][1];
  EXPECT_LT(std::stod(calm[0][2]), 0.5);

  // The saturated sweep against itself: the same conditions, both sides client-bound.
  EXPECT_EQ(RunServesweep(fmt::format("compare {} {}", h.Path("sat"), h.Path("sat")), &output), 1);
  EXPECT_NE(output.find("refusing to compare runs that are not certified"), std::string::npos)
      << output;
  EXPECT_NE(output.find("client-bound: "), std::string::npos) << output;
  EXPECT_EQ(
      RunServesweep(fmt::format("compare {} {} --include-invalid", h.Path("sat"), h.Path("sat")),
                    &output),
      0)
      << output;
}

TEST(Certified, BenchNamesWhyRequestsFailedOnTheConsoleAndInItsJson) {
  Harness h("certified-bench");
  const uint16_t port = FreeLoopbackPort();
  h.Start("sim", {"sim", "--port", std::to_string(port), "--model", "sim-model"});
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  ASSERT_TRUE(Harness::WaitForHealthy(url));
  const std::string json = h.Path("result.json");
  std::string output;
  EXPECT_EQ(RunServesweep(fmt::format("bench --url {} --model sim --concurrency 2 --num-requests 8 "
                                      "--input-len 8 --output-len 4 --result-json {}",
                                      url, json),
                          &output),
            1);
  EXPECT_NE(output.find("8 x HTTP 404: The model `sim` does not exist."), std::string::npos)
      << output;
  const auto result = nlohmann::json::parse(ReadTextFile(json));
  ASSERT_EQ(result.at("errors").size(), 8u);
  EXPECT_EQ(result.at("errors")[0], "HTTP 404: The model `sim` does not exist.");
  EXPECT_EQ(result.at("failure_reasons").at("HTTP 404: The model `sim` does not exist."), 8);
  EXPECT_EQ(result.at("failed"), 8);
}

}  // namespace
}  // namespace servesweep::testing
