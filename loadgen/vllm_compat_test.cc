// The --compat vllm view against hand-computed fixtures, beside servesweep's own view of the same
// requests, and the chunk rules of vLLM's client against payloads.
#include "loadgen/vllm_compat.h"

#include <gtest/gtest.h>

#include "loadgen/bench_metrics.h"
#include "testing/test_sse_server.h"

namespace servesweep::loadgen {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(ClassifyVllmChunk, FollowsVllmsClient) {
  const char* role =
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})";
  EXPECT_TRUE(ClassifyVllmChunk(role, true).has_choices);  // a "token" for vLLM, not for us
  const VllmChunk usage = ClassifyVllmChunk(
      R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}})", true);
  EXPECT_FALSE(usage.has_choices);
  EXPECT_TRUE(usage.usage);
  EXPECT_EQ(usage.completion_tokens, 3u);
  EXPECT_EQ(usage.prompt_tokens, 7);
  // Usage on a chunk with choices is not read (`elif usage := ...`).
  const VllmChunk both = ClassifyVllmChunk(
      R"({"choices":[{"index":0,"text":"a"}],"usage":{"completion_tokens":1}})", false);
  EXPECT_TRUE(both.has_choices);
  EXPECT_FALSE(both.usage);
  // An error event: no choices, no usage: ignored, no exception.
  const VllmChunk error = ClassifyVllmChunk(R"({"error":{"message":"oops"}})", true);
  EXPECT_FALSE(error.has_choices || error.usage || error.exception);
  EXPECT_TRUE(ClassifyVllmChunk("not json", false).exception);
  EXPECT_TRUE(ClassifyVllmChunk("[1,2]", false).exception);
  // Chat reads choices[0]["delta"]: a completions-shaped choice raises there.
  EXPECT_TRUE(ClassifyVllmChunk(R"({"choices":[{"index":0,"text":"x"}]})", true).exception);
  EXPECT_TRUE(ClassifyVllmChunk(R"({"choices":[{"index":0,"text":"x"}]})", false).has_choices);
  EXPECT_TRUE(ClassifyVllmChunk(" [DONE] ", false).done);
}

// Request A: chat, role-only chunk at 10 ms, text at 30, 40, 50 ms, usage 3 tokens, prompt 5.
// Request D: role-only chunk at 105 ms (start 100 ms) and nothing else, no usage.
LoadResult Fixture() {
  LoadResult res;
  res.duration_s = 0.2;
  RequestRecord a;
  a.index = 0;
  a.start_ns = 0;
  a.scheduled_ns = 0;
  a.chunk_times_ns = {30 * kMs, 40 * kMs, 50 * kMs};
  a.chunk_tokens = {1, 1, 1};
  a.first_token_ns = 30 * kMs;
  a.end_ns = 50 * kMs;
  a.output_tokens = 3;
  a.prompt_tokens = 5;
  a.success = true;
  a.vllm_chunk_times_ns = {10 * kMs, 30 * kMs, 40 * kMs, 50 * kMs};
  a.vllm_output_tokens = 3;
  a.vllm_prompt_tokens = 5;
  a.vllm_success = true;
  RequestRecord d;
  d.index = 1;
  d.start_ns = 100 * kMs;
  d.scheduled_ns = 100 * kMs;
  d.prompt_tokens = 5;
  d.success = false;
  d.error = "no output tokens";
  d.vllm_chunk_times_ns = {105 * kMs};
  d.vllm_prompt_tokens = 5;
  d.vllm_success = true;
  res.requests = {a, d};
  return res;
}

TEST(SummarizeVllm, HandComputedFixtureWithARoleOnlyFirstChunk) {
  const SloLimits slo{8, 0, 0};
  const BenchSummary v = SummarizeVllm(Fixture(), slo);
  EXPECT_EQ(v.completed, 2u);  // vLLM: a lone role chunk is a success
  EXPECT_EQ(v.failed, 0u);
  EXPECT_EQ(v.total_input_tokens, 10u);
  EXPECT_EQ(v.total_output_tokens, 4u);  // 3 from usage + 1 (no usage, no tokenizer)
  EXPECT_DOUBLE_EQ(v.request_throughput, 10);
  EXPECT_DOUBLE_EQ(v.output_throughput, 20);
  EXPECT_DOUBLE_EQ(v.total_token_throughput, 70);
  EXPECT_DOUBLE_EQ(v.ttft_ms.mean, 7.5);  // TTFTs 10 and 5 ms: the role chunks
  EXPECT_DOUBLE_EQ(v.ttft_ms.median, 7.5);
  EXPECT_DOUBLE_EQ(v.ttft_ms.std, 2.5);
  EXPECT_NEAR(v.ttft_ms.p99, 9.95, 1e-12);
  EXPECT_DOUBLE_EQ(v.tpot_ms.mean, 20);  // (50 - 10) / 2; D has one token: no TPOT
  EXPECT_EQ(v.tpot_ms.count, 1u);
  EXPECT_NEAR(v.itl_ms.mean, 40.0 / 3, 1e-12);  // 20, 10, 10
  EXPECT_DOUBLE_EQ(v.itl_ms.median, 10);
  EXPECT_NEAR(v.itl_ms.p99, 19.8, 1e-12);
  EXPECT_DOUBLE_EQ(v.e2el_ms.mean, 27.5);  // 50 and 5
  EXPECT_DOUBLE_EQ(v.goodput, 5);          // only D meets TTFT <= 8 ms

  const BenchSummary ours = Summarize(Fixture(), slo);
  EXPECT_EQ(ours.completed, 1u);  // D carried no text: failed
  EXPECT_EQ(ours.failed, 1u);
  EXPECT_EQ(ours.total_output_tokens, 3u);
  EXPECT_DOUBLE_EQ(ours.request_throughput, 5);
  EXPECT_DOUBLE_EQ(ours.output_throughput, 15);
  EXPECT_DOUBLE_EQ(ours.ttft_ms.mean, 30);  // to the first text
  EXPECT_DOUBLE_EQ(ours.tpot_ms.mean, 10);
  EXPECT_DOUBLE_EQ(ours.itl_ms.mean, 10);
  EXPECT_DOUBLE_EQ(ours.e2el_ms.mean, 50);
  EXPECT_DOUBLE_EQ(ours.goodput, 0);
}

TEST(SummarizeVllm, EmptyListsReportZeroAsNumpyDoes) {
  LoadResult res;
  res.duration_s = 1;
  RequestRecord r;
  r.vllm_success = false;
  res.requests = {r};
  const BenchSummary v = SummarizeVllm(res);
  EXPECT_EQ(v.failed, 1u);
  EXPECT_DOUBLE_EQ(v.ttft_ms.mean, 0);
  EXPECT_DOUBLE_EQ(v.itl_ms.p99, 0);
  EXPECT_EQ(v.ttft_ms.count, 0u);
  EXPECT_TRUE(std::isnan(v.goodput));  // no SLO: vLLM writes None
}

TEST(VllmView, RecordedFromRealStreams) {
  testing::TestSseServer server(20000);  // 20 ms before each token; the role chunk at once
  LoadSettings s;
  s.base_url = server.base_url();
  s.api = Api::kChatCompletions;
  s.num_requests = 4;
  s.concurrency = 2;
  s.input_len_tok = 6;
  s.output_len_tok = 5;
  s.vllm_view = true;
  s.model = "ok";
  LoadResult ok;
  ASSERT_TRUE(RunLoad(s, &ok).ok());
  for (const RequestRecord& r : ok.requests) {
    ASSERT_TRUE(r.success && r.vllm_success) << r.error;
    // The role-only chunk is one more "token" for vLLM, and it came first.
    ASSERT_EQ(r.vllm_chunk_times_ns.size(), r.chunk_times_ns.size() + 1);
    // vLLM's TTFT is the role chunk's, 20 ms before ours; our TTFB is that first byte too.
    EXPECT_LE(r.vllm_chunk_times_ns.front(), r.first_token_ns - 15 * kMs);
    EXPECT_EQ(r.first_byte_ns, r.vllm_chunk_times_ns.front());
    EXPECT_EQ(r.vllm_output_tokens, 5u);
  }
  const BenchSummary ours = Summarize(ok), vllm = SummarizeVllm(ok);
  EXPECT_GT(ours.ttft_ms.median - vllm.ttft_ms.median, 15);
  EXPECT_LT(ours.ttfb_ms.median, ours.ttft_ms.median - 15);
  s.num_requests = 1;
  s.model = "error_event";  // a token, then an error event: vLLM ignores the error
  LoadResult err;
  ASSERT_TRUE(RunLoad(s, &err).ok());
  for (const RequestRecord& r : err.requests) {
    EXPECT_FALSE(r.success);
    EXPECT_TRUE(r.vllm_success);
  }
  s.model = "http500";
  LoadResult failed;
  ASSERT_TRUE(RunLoad(s, &failed).ok());
  for (const RequestRecord& r : failed.requests) EXPECT_FALSE(r.vllm_success);
}

}  // namespace
}  // namespace servesweep::loadgen
