// The load generator measured against the emulator in another process: the emulator's timing is
// the ground truth (its request log records when each token was handed to the socket).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "agent/http_get.h"
#include "agent/loadgen/bench_metrics.h"
#include "agent/loadgen/load_generator.h"
#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

constexpr double kTtftMs = 20;
constexpr double kItlMs = 5;
constexpr double kToleranceMs = 2;

class LoadgenVsSim : public ::testing::TestWithParam<uint32_t> {};

TEST_P(LoadgenVsSim, TtftAndItlMatchTheConfiguredTiming) {
  const uint32_t concurrency = GetParam();
  Harness h(fmt::format("loadgen-c{}", concurrency));
  const uint16_t port = FreeLoopbackPort();
  const std::string request_log = h.Path("requests.jsonl");
  const size_t sim = h.Start("sim", {"sim", "--port", std::to_string(port), "--model", "m",
                                     "--ttft-ms", std::to_string(kTtftMs), "--itl-ms",
                                     std::to_string(kItlMs), "--request-log", request_log});
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  ASSERT_TRUE(Harness::WaitFor(
      [&] {
        agent::HttpResponse r;
        return agent::HttpGet(url + "/health", 200, &r).ok() && r.status_code == 200;
      },
      std::chrono::seconds(10)));

  loadgen::LoadSettings settings;
  settings.base_url = url;
  settings.model = "m";
  settings.concurrency = concurrency;
  settings.num_requests = concurrency * 4;
  settings.warmup_requests = concurrency;
  settings.input_len_tok = 64;
  settings.output_len_tok = 16;
  const loadgen::LoadResult result = loadgen::RunLoad(settings);
  const loadgen::BenchSummary summary = loadgen::Summarize(result);

  ASSERT_EQ(summary.completed, settings.num_requests);
  EXPECT_EQ(summary.failed, 0u);
  EXPECT_EQ(summary.total_output_tokens, uint64_t{settings.num_requests} * 16);
  EXPECT_EQ(summary.total_input_tokens, uint64_t{settings.num_requests} * 64);
  // TTFT against the configured timing also holds the request's way in. At 64 sends at once on
  // 2 cores, the client sends them one by one and the emulator reads them one by one: measured
  // (bench/loadgen_fidelity agree, c=64) p50 0.7-0.9 ms and p99 ~4 ms from client start to the
  // emulator's read, so the median is allowed that leg on top. The client's own share is held
  // to kToleranceMs below, against the emulator's log.
  const double ttft_tolerance_ms = concurrency >= 64 ? 2 * kToleranceMs : kToleranceMs;
  EXPECT_NEAR(summary.ttft_ms.median, kTtftMs, ttft_tolerance_ms);
  EXPECT_NEAR(summary.ttft_ms.mean, kTtftMs, ttft_tolerance_ms);
  EXPECT_NEAR(summary.itl_ms.median, kItlMs, kToleranceMs);
  EXPECT_NEAR(summary.itl_ms.mean, kItlMs, kToleranceMs);
  EXPECT_NEAR(summary.tpot_ms.median, kItlMs, kToleranceMs);
  EXPECT_EQ(summary.itl_ms.count, uint64_t{settings.num_requests} * 15);

  // Against the ground truth (the emulator's log: same monotonic clock, another process):
  // every request finished with the same token count; for each request the client's TTFT can
  // only exceed the server's (the client starts before the server reads the request and reads
  // each token after it is written), so the fastest client TTFT is no faster than the fastest
  // server TTFT, and the client adds at most the tolerance to the median.
  // The emulator logs a request when its last write completes and flushes every second: wait
  // for every line (a starved machine runs those completions late), then stop it.
  const size_t expected_lines = size_t{settings.num_requests} + settings.warmup_requests;
  Harness::WaitFor(
      [&] {
        std::ifstream in(request_log);
        return static_cast<size_t>(std::count(std::istreambuf_iterator<char>(in),
                                              std::istreambuf_iterator<char>(), '\n')) >=
               expected_lines;
      },
      std::chrono::seconds(10));
  h.process(sim).Stop(std::chrono::seconds(5));
  std::ifstream log(request_log);
  std::string line;
  size_t logged = 0;
  std::vector<double> server_ttft_ms;
  while (std::getline(log, line)) {
    const auto entry = nlohmann::json::parse(line);
    EXPECT_EQ(entry.at("status"), "ok");
    EXPECT_EQ(entry.at("completion_tokens"), 16);
    const auto& tokens = entry.at("token_ns");
    ASSERT_EQ(tokens.size(), 16u);
    server_ttft_ms.push_back((tokens[0].get<int64_t>() - entry.at("arrival_ns").get<int64_t>()) /
                             1e6);
    ++logged;
  }
  const loadgen::Stats server = loadgen::ComputeStats(server_ttft_ms);
  EXPECT_NEAR(server.median, kTtftMs, kToleranceMs);
  EXPECT_GE(summary.ttft_ms.min, server.min);
  EXPECT_GE(summary.ttft_ms.median - server.median, -0.5);
  EXPECT_LE(summary.ttft_ms.median - server.median, kToleranceMs);
  EXPECT_EQ(logged, expected_lines);
}

INSTANTIATE_TEST_SUITE_P(Concurrency, LoadgenVsSim, ::testing::Values(1u, 64u));

}  // namespace
}  // namespace servesweep::testing
