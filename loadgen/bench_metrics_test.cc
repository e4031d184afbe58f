#include "loadgen/bench_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::loadgen {
namespace {

constexpr double kEps = 1e-9;
constexpr int64_t kMs = 1'000'000;

TEST(ComputeStats, NumpyPercentilesAndPopulationStd) {
  Stats s = ComputeStats({4, 1, 3, 2});  // unsorted on purpose
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_NEAR(s.std, 1.118033988749895, kEps);  // sqrt(1.25): population, not sample
  EXPECT_NEAR(s.p99, 3.97, kEps);               // 3 + 0.97 * (4 - 3)
  EXPECT_NEAR(s.p95, 3.85, kEps);
  EXPECT_NEAR(s.p90, 3.7, kEps);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
}

TEST(ComputeStats, SingleValueAndEmpty) {
  Stats one = ComputeStats({7});
  EXPECT_DOUBLE_EQ(one.p99, 7);
  EXPECT_DOUBLE_EQ(one.median, 7);
  EXPECT_DOUBLE_EQ(one.std, 0);
  Stats none = ComputeStats({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_TRUE(std::isnan(none.mean));
  EXPECT_TRUE(std::isnan(none.p99));
}

TEST(ComputeStats, OddCountMedianIsMiddle) {
  Stats s = ComputeStats({10, 30, 20, 50, 40});
  EXPECT_DOUBLE_EQ(s.median, 30);
  EXPECT_NEAR(s.p99, 49.6, kEps);  // pos 3.96 -> 40 + 0.96 * 10
}

RequestRecord Ok(int64_t start_ms, std::vector<int64_t> chunks_ms, uint32_t out_tok,
                 uint32_t prompt_tok) {
  RequestRecord r;
  r.success = true;
  r.start_ns = start_ms * kMs;
  for (int64_t c : chunks_ms) {
    r.chunk_times_ns.push_back(c * kMs);
    r.chunk_tokens.push_back(1);
  }
  r.first_token_ns = r.chunk_times_ns.front();
  r.end_ns = r.chunk_times_ns.back();
  r.output_tokens = out_tok;
  r.prompt_tokens = prompt_tok;
  return r;
}

// A: ttft 100 ms, e2el 190, 4 tokens in 4 chunks -> tpot 30, itl 20/30/40
// B: ttft 200, e2el 250, 6 tokens in 2 chunks (usage says 6) -> tpot 10, itl 50
// C: ttft 300, e2el 300, 1 token -> no tpot (goodput sees tpot 0), no itl
// D: failed; its tokens count nowhere.
LoadResult Crafted() {
  LoadResult res;
  res.duration_s = 2.0;
  res.requests.push_back(Ok(0, {100, 120, 150, 190}, 4, 10));
  res.requests.push_back(Ok(50, {250, 300}, 6, 20));
  res.requests.push_back(Ok(100, {400}, 1, 30));
  RequestRecord d;
  d.success = false;
  d.prompt_tokens = 40;
  d.output_tokens = 3;
  d.error = "HTTP 500: boom";
  res.requests.push_back(d);
  return res;
}

TEST(Summarize, EveryVllmFormula) {
  BenchSummary s = Summarize(Crafted());
  EXPECT_EQ(s.completed, 3u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.total_input_tokens, 60u);  // successful requests only, as vLLM
  EXPECT_EQ(s.total_output_tokens, 11u);
  EXPECT_DOUBLE_EQ(s.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(s.output_throughput, 5.5);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 35.5);
  EXPECT_TRUE(std::isnan(s.goodput));

  EXPECT_EQ(s.ttft_ms.count, 3u);
  EXPECT_NEAR(s.ttft_ms.mean, 200, kEps);
  EXPECT_NEAR(s.ttft_ms.median, 200, kEps);
  EXPECT_NEAR(s.ttft_ms.std, 81.64965809277261, kEps);
  EXPECT_NEAR(s.ttft_ms.p99, 298, kEps);

  EXPECT_EQ(s.tpot_ms.count, 2u);  // C (1 token) has no TPOT
  EXPECT_NEAR(s.tpot_ms.mean, 20, kEps);
  EXPECT_NEAR(s.tpot_ms.median, 20, kEps);
  EXPECT_NEAR(s.tpot_ms.std, 10, kEps);
  EXPECT_NEAR(s.tpot_ms.p99, 29.8, kEps);

  EXPECT_EQ(s.itl_ms.count, 4u);  // per chunk, flattened over requests
  EXPECT_NEAR(s.itl_ms.mean, 35, kEps);
  EXPECT_NEAR(s.itl_ms.median, 35, kEps);
  EXPECT_NEAR(s.itl_ms.std, 11.180339887498949, kEps);
  EXPECT_NEAR(s.itl_ms.p99, 49.7, kEps);

  EXPECT_EQ(s.e2el_ms.count, 3u);
  EXPECT_NEAR(s.e2el_ms.mean, 740.0 / 3, kEps);
  EXPECT_NEAR(s.e2el_ms.median, 250, kEps);
  EXPECT_NEAR(s.e2el_ms.std, 44.96912521077347, kEps);
  EXPECT_NEAR(s.e2el_ms.p99, 299, kEps);

  // (out - 1) / (end - first): A 3 / 0.09 s, B 5 / 0.05 s; C has one token.
  EXPECT_EQ(s.decode_tok_per_s.count, 2u);
  EXPECT_NEAR(s.decode_tok_per_s.mean, 66.66666666666667, 1e-6);
  EXPECT_NEAR(s.decode_tok_per_s.min, 100.0 / 3, 1e-6);
  // prompt / ttft: 10 / 0.1, 20 / 0.2, 30 / 0.3.
  EXPECT_EQ(s.prefill_tok_per_s.count, 3u);
  EXPECT_NEAR(s.prefill_tok_per_s.mean, 100, 1e-6);
  EXPECT_NEAR(s.prefill_tok_per_s.std, 0, 1e-6);
}

// Latencies run from the send; the client's own time before it (connection setup, the wait
// inside libcurl) is the client send delay. A: handed to libcurl at 0, sent at 4 ms; B: sent at
// once; C: no send time (a record from before sent_ns): its latencies run from its start.
TEST(Summarize, LatenciesRunFromTheSendAndTheSendDelayIsApart) {
  LoadResult res;
  res.duration_s = 1.0;
  res.requests.push_back(Ok(0, {100, 150}, 2, 10));
  res.requests.back().sent_ns = 4 * kMs;
  res.requests.back().first_byte_ns = 50 * kMs;
  res.requests.push_back(Ok(10, {60, 80}, 2, 10));
  res.requests.back().sent_ns = 10 * kMs;
  res.requests.push_back(Ok(20, {70, 90}, 2, 10));
  const BenchSummary s = Summarize(res);
  EXPECT_NEAR(s.ttft_ms.min, 50, kEps);     // B: 60 - 10; C: 70 - 20
  EXPECT_NEAR(s.ttft_ms.max, 96, kEps);     // A: 100 - 4, not 100 - 0
  EXPECT_NEAR(s.e2el_ms.max, 146, kEps);    // A: 150 - 4
  EXPECT_NEAR(s.tpot_ms.max, 50, kEps);     // A: (146 - 96) / 1
  EXPECT_NEAR(s.ttfb_ms.median, 46, kEps);  // A: 50 - 4
  EXPECT_EQ(s.client_send_ms.count, 2u);    // C has no send time
  EXPECT_NEAR(s.client_send_ms.max, 4, kEps);
  EXPECT_NEAR(s.client_send_ms.min, 0, kEps);
}

TEST(Summarize, SaysWhereTheOutputTokensCameFrom) {
  EXPECT_EQ(DescribeOutputTokensSource(0, 0), "n/a: no completed request");
  EXPECT_EQ(DescribeOutputTokensSource(4, 4), "server usage");
  EXPECT_EQ(DescribeOutputTokensSource(0, 4), "chunk count");
  EXPECT_EQ(DescribeOutputTokensSource(3, 4),
            "server usage for 3 of 4 requests, chunk count for the rest");
}

TEST(Summarize, GoodputAsVllm) {
  // ttft <= 250 and tpot <= 25: A fails tpot (30), C fails ttft (300): only B.
  EXPECT_DOUBLE_EQ(Summarize(Crafted(), {250, 25, 0}).goodput, 0.5);
  // tpot <= 15 uses vLLM's all_tpots, where the 1-token C counts as tpot 0: B and C.
  EXPECT_DOUBLE_EQ(Summarize(Crafted(), {0, 15, 0}).goodput, 1.0);
  // e2el <= 300 is inclusive: C (exactly 300 ms) is good.
  EXPECT_DOUBLE_EQ(Summarize(Crafted(), {0, 0, 300}).goodput, 1.5);
  EXPECT_DOUBLE_EQ(Summarize(Crafted(), {0, 0, 299}).goodput, 1.0);
}

TEST(ToVllmJson, KeysAndValues) {
  nlohmann::json j = ToVllmJson(Summarize(Crafted()));
  EXPECT_DOUBLE_EQ(j.at("duration").get<double>(), 2.0);
  EXPECT_EQ(j.at("completed").get<int>(), 3);
  EXPECT_EQ(j.at("failed").get<int>(), 1);
  EXPECT_EQ(j.at("total_input_tokens").get<int>(), 60);
  EXPECT_EQ(j.at("total_output_tokens").get<int>(), 11);
  EXPECT_DOUBLE_EQ(j.at("request_throughput").get<double>(), 1.5);
  EXPECT_TRUE(j.at("request_goodput").is_null());
  EXPECT_DOUBLE_EQ(j.at("output_throughput").get<double>(), 5.5);
  EXPECT_DOUBLE_EQ(j.at("total_token_throughput").get<double>(), 35.5);
  for (const char* m : {"ttft", "tpot", "itl", "e2el"}) {
    for (const char* stat : {"mean", "median", "std", "p99"}) {
      std::string key = std::string(stat) + "_" + m + "_ms";
      EXPECT_TRUE(j.contains(key)) << key;
    }
  }
  EXPECT_NEAR(j.at("p99_itl_ms").get<double>(), 49.7, kEps);
  EXPECT_NEAR(j.at("median_e2el_ms").get<double>(), 250, kEps);
  EXPECT_EQ(j.size(), 9u + 16u);
  EXPECT_DOUBLE_EQ(
      ToVllmJson(Summarize(Crafted(), {250, 25, 0})).at("request_goodput").get<double>(), 0.5);
}

TEST(ToVllmJson, EmptyListsReportZeroLikeVllm) {
  LoadResult res;
  res.duration_s = 1;
  nlohmann::json j = ToVllmJson(Summarize(res));
  EXPECT_EQ(j.at("mean_ttft_ms").get<double>(), 0.0);
  EXPECT_EQ(j.at("p99_itl_ms").get<double>(), 0.0);
  EXPECT_EQ(j.at("completed").get<int>(), 0);
}

}  // namespace
}  // namespace servesweep::loadgen
