// The load generator measured against the emulator in another process: the emulator's timing is
// the ground truth (its request log records when each token was handed to the socket).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"
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
  ASSERT_TRUE(Harness::WaitForHealthy(url));

  loadgen::LoadSettings settings;
  settings.base_url = url;
  settings.model = "m";
  settings.concurrency = concurrency;
  settings.num_requests = concurrency * 4;
  settings.warmup_requests = concurrency;
  settings.input_len_tok = 64;
  settings.output_len_tok = 16;
  loadgen::LoadResult result;
  ASSERT_TRUE(loadgen::RunLoad(settings, &result).ok());
  const loadgen::BenchSummary summary = loadgen::Summarize(result);

  ASSERT_EQ(summary.completed, settings.num_requests);
  EXPECT_EQ(summary.failed, 0u);
  EXPECT_EQ(summary.total_output_tokens, uint64_t{settings.num_requests} * 16);
  EXPECT_EQ(summary.total_input_tokens, uint64_t{settings.num_requests} * 64);
  // TTFT runs from the request's send (the client's own send delay is apart) and the emulator
  // schedules the first token from the kernel's receive time of the request, so even 64 sends
  // at once are held to the same tolerance.
  EXPECT_NEAR(summary.ttft_ms.median, kTtftMs, kToleranceMs);
  EXPECT_NEAR(summary.ttft_ms.mean, kTtftMs, kToleranceMs);
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

// The client's timestamps are the kernel's receive times, not when its thread got to the bytes:
// a load thread kept busy 30 ms of every ~100 ms (its progress callback sleeps) still times each
// token within a few ms of the emulator's write. Stamped by the clock at read time, the tokens
// that arrive during a sleep (about a third) were up to 30 ms late. Tokens are 50 ms apart, so
// no stream has two waiting at once: TCP merges queued segments under the newest one's time.
TEST(LoadgenVsSimBusyClient, ReadsKeepTheirArrivalTimeWhileTheLoadThreadIsBusy) {
  Harness h("loadgen-busy");
  const uint16_t port = FreeLoopbackPort();
  const std::string request_log = h.Path("requests.jsonl");
  const size_t sim =
      h.Start("sim", {"sim", "--port", std::to_string(port), "--model", "m", "--ttft-ms", "20",
                      "--itl-ms", "50", "--request-log", request_log});
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  ASSERT_TRUE(Harness::WaitForHealthy(url));

  constexpr uint32_t kRequests = 8, kTokens = 10;
  loadgen::LoadSettings settings;
  settings.base_url = url;
  settings.model = "m";
  settings.concurrency = 4;
  settings.num_requests = kRequests;
  settings.input_len_tok = 16;
  settings.output_len_tok = kTokens;
  // Each request's prompt has its own length (token ids, counted exactly by the emulator): that
  // pairs it with its line of the emulator's log.
  settings.token_id_prompts = true;
  settings.replay_arrivals = false;
  for (uint32_t i = 0; i < kRequests; ++i) {
    loadgen::PlannedRequest planned;
    planned.input_len_tok = 16 + i;
    planned.output_len_tok = kTokens;
    settings.plan.push_back(planned);
  }
  uint32_t busy_spells = 0;
  loadgen::LoadResult result;
  ASSERT_TRUE(loadgen::RunLoad(settings, &result, [&](const loadgen::Progress&) {
                ++busy_spells;
                std::this_thread::sleep_for(std::chrono::milliseconds(30));
              }).ok());
  EXPECT_GE(busy_spells, 5u);

  ASSERT_TRUE(Harness::WaitFor(
      [&] {
        std::ifstream in(request_log);
        return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(),
                          '\n') >= kRequests;
      },
      std::chrono::seconds(10)));
  h.process(sim).Stop(std::chrono::seconds(5));
  std::map<uint32_t, std::vector<int64_t>> written_ns;  // prompt length -> token write times
  std::ifstream log(request_log);
  for (std::string line; std::getline(log, line);) {
    const auto entry = nlohmann::json::parse(line);
    written_ns[entry.at("prompt_tokens").get<uint32_t>()] =
        entry.at("token_ns").get<std::vector<int64_t>>();
  }
  std::vector<double> late_ms;  // client's time - emulator's write, every token
  for (const loadgen::RequestRecord& r : result.requests) {
    ASSERT_TRUE(r.success) << r.error;
    const auto& written = written_ns.at(r.prompt_tokens);
    ASSERT_EQ(written.size(), r.chunk_times_ns.size());
    for (size_t k = 0; k < written.size(); ++k) {
      late_ms.push_back(
          static_cast<double>(result.t0_steady_ns + r.chunk_times_ns[k] - written[k]) / 1e6);
    }
  }
  ASSERT_EQ(late_ms.size(), size_t{kRequests} * kTokens);
  const loadgen::Stats late = loadgen::ComputeStats(late_ms);
  EXPECT_GE(late.min, -0.5);  // never before the write (clocks are the same)
  EXPECT_LT(late.max, 5.0) << "p50 " << late.median << " ms, p99 " << late.p99 << " ms";
}

}  // namespace
}  // namespace servesweep::testing
