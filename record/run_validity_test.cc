// The validity gate (record/run_validity.h) on hand-made counts: each reason alone, the
// tolerances at their edge, and "not reconciled" without engine counters.
#include "record/run_validity.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::record {
namespace {

// `n` streamed requests of 10 prompt and 20 output tokens, usage-counted.
std::vector<loadgen::RequestRecord> Requests(int n) {
  std::vector<loadgen::RequestRecord> out(n);
  for (auto& r : out) {
    r.http_status = 200;
    r.success = true;
    r.prompt_tokens = 10;
    r.output_tokens = 20;
    r.output_tokens_from_usage = true;
  }
  return out;
}

ValidityInputs Inputs(const std::vector<loadgen::RequestRecord>& requests, double requests_seen,
                      double prompt_seen, double generation_seen) {
  ValidityInputs in;
  for (const auto& r : requests) in.requests.push_back(&r);
  in.measured = static_cast<uint32_t>(requests.size());
  in.completed = in.measured;
  in.measured_output_tok = 20 * in.measured;
  in.before = {{"requests_finished", 5}, {"prompt_tokens", 50}, {"generation_tokens", 100}};
  in.after = {{"requests_finished", 5 + requests_seen},
              {"prompt_tokens", 50 + prompt_seen},
              {"generation_tokens", 100 + generation_seen}};
  return in;
}

TEST(Validity, AgreeingCountsAreValid) {
  const auto requests = Requests(100);
  const Validity v = JudgeValidity(Inputs(requests, 100, 1000, 2000));
  EXPECT_EQ(v.verdict, schema::Validity::VALID) << v.Reasons();
  ASSERT_EQ(v.counters.size(), 3u);
  EXPECT_EQ(v.counters[2].client, 2000);
  EXPECT_EQ(v.counters[2].engine, 2000);
  EXPECT_EQ(v.counters[2].tolerance, 20);  // 1% of 2000 (more than the 16-token floor)
}

TEST(Validity, TokensOutsideTheToleranceAndAMissingRequestAreInvalid) {
  const auto requests = Requests(100);
  EXPECT_EQ(JudgeValidity(Inputs(requests, 100, 1000, 2020)).verdict,
            schema::Validity::VALID);  // at the edge
  const Validity v = JudgeValidity(Inputs(requests, 99, 1000, 2021));
  EXPECT_EQ(v.verdict, schema::Validity::INVALID);
  EXPECT_EQ(v.Reasons(),
            "requests: the client counted 100, the engine 99 (tolerance 0); generation tokens: "
            "the client counted 2000, the engine 2021 (tolerance 20)");
}

TEST(Validity, NoOutputLowSuccessAndARestartAreEachAReason) {
  auto requests = Requests(20);
  ValidityInputs in = Inputs(requests, 20, 200, 400);
  in.completed = 18;  // 90% < 95%
  Validity v = JudgeValidity(in);
  EXPECT_EQ(v.verdict, schema::Validity::INVALID);
  EXPECT_EQ(v.Reasons(), "success rate 90.0% (18 of 20) below min_success_rate 95%");
  in.min_success_rate = 0.9;
  EXPECT_EQ(JudgeValidity(in).verdict, schema::Validity::VALID);
  in.measured_output_tok = 0;
  EXPECT_NE(JudgeValidity(in).Reasons().find("no output tokens"), std::string::npos);
  in.measured_output_tok = 400;
  // A scrape during the run saw a counter lower than the one before it: a fresh process.
  in.during = {{1, "generation_tokens", 300}, {2, "generation_tokens", 10}};
  v = JudgeValidity(in);
  EXPECT_EQ(v.engine_restarts, 1u);
  EXPECT_NE(v.Reasons().find("the engine restarted during the run"), std::string::npos);
  // A process start time that moved is a restart too, whatever the counters did.
  EXPECT_EQ(CountEngineRestarts({{"process_start_time", 1000}}, {}, {{"process_start_time", 1001}}),
            1u);
  EXPECT_EQ(CountEngineRestarts({{"process_start_time", 1000}}, {{0, "running", 1}},
                                {{"process_start_time", 1000}}),
            0u);
}

// A measured phase shorter than any request measures nothing: one reason that says so, not a
// success rate of 0 of 0 or "no output tokens".
TEST(Validity, NoMeasuredRequestIsOneReasonThatSaysWhy) {
  std::vector<loadgen::RequestRecord> none;
  ValidityInputs in = Inputs(none, 0, 0, 0);
  const Validity v = JudgeValidity(in);
  EXPECT_EQ(v.verdict, schema::Validity::INVALID);
  EXPECT_EQ(v.reasons.size(), 1u) << v.Reasons();
  EXPECT_EQ(v.Reasons().rfind("no request was measured", 0), 0u) << v.Reasons();
}

TEST(Validity, WithoutCountersTheRunIsNotReconciledAndWithoutUsageTokensAreUnchecked) {
  const auto requests = Requests(10);
  ValidityInputs in = Inputs(requests, 10, 100, 200);
  in.before.clear();
  in.after.clear();
  Validity v = JudgeValidity(in);
  EXPECT_EQ(v.verdict, schema::Validity::NOT_RECONCILED);
  EXPECT_EQ(v.reasons.size(), 3u);
  auto chunk_counted = Requests(10);
  chunk_counted[3].output_tokens_from_usage = false;
  v = JudgeValidity(Inputs(chunk_counted, 10, 100, 999));
  EXPECT_EQ(v.verdict,
            schema::Validity::VALID);  // requests agree; the tokens are not the server's own count
  EXPECT_FALSE(v.counters[2].checked());
  EXPECT_NE(v.counters[2].why_unchecked.find("no usage for 1 request"), std::string::npos);
  // A request the server refused (no 200 stream) never reached the engine's counters.
  auto refused = Requests(10);
  refused[0].http_status = 404;
  EXPECT_EQ(JudgeValidity(Inputs(refused, 9, 90, 180)).verdict, schema::Validity::VALID);
}

// The engine's prefix-cache counters at the measured phase's first and last scrape: `hits` of
// `queries` prompt tokens in between (the warm-up's priming before them is not counted).
std::vector<scraper::ScrapedSample> PrefixScrapes(double hits, double queries) {
  return {{0, "prefix_cache_hits", 700},
          {0, "prefix_cache_queries", 800},
          {1'000'000, "prefix_cache_hits", 700 + hits / 2},
          {1'000'000, "prefix_cache_queries", 800 + queries / 2},
          {2'000'000, "prefix_cache_hits", 700 + hits},
          {2'000'000, "prefix_cache_queries", 800 + queries}};
}

TEST(Validity, ASetPrefixHitRateIsMeasuredOverThePhaseAndFiveOrFewerPointsOffIsValid) {
  const auto requests = Requests(100);
  ValidityInputs in = Inputs(requests, 100, 1000, 2000);
  in.prefix_hit_rate_target = 0.5;
  in.during = PrefixScrapes(450, 1000);  // 45.0%: 5 points off, at the edge
  Validity v = JudgeValidity(in);
  EXPECT_EQ(v.verdict, schema::Validity::VALID) << v.Reasons();
  EXPECT_DOUBLE_EQ(v.prefix_hit_rate, 0.45);
  in.during = PrefixScrapes(449, 1000);  // 44.9%
  v = JudgeValidity(in);
  EXPECT_EQ(v.verdict, schema::Validity::INVALID);
  EXPECT_EQ(v.Reasons(),
            "prefix-cache hit rate 44.9% (449 of 1000 prompt tokens) measured, 50.0% set: more "
            "than 5 points off");
  in.prefix_hit_rate_target = 0;  // a cache that serves what no one asked for is off too
  in.during = PrefixScrapes(60, 1000);
  EXPECT_EQ(JudgeValidity(in).verdict, schema::Validity::INVALID);
  in.during = PrefixScrapes(50, 1000);
  EXPECT_EQ(JudgeValidity(in).verdict, schema::Validity::VALID);
}

TEST(Validity, ASetPrefixHitRateTheEngineCannotCountLeavesTheRunNotReconciled) {
  const auto requests = Requests(100);
  ValidityInputs in = Inputs(requests, 100, 1000, 2000);
  in.prefix_hit_rate_target = 0.5;
  Validity v = JudgeValidity(in);  // no prefix-cache counter scraped
  EXPECT_EQ(v.verdict, schema::Validity::NOT_RECONCILED);
  EXPECT_EQ(v.Reasons(),
            "prefix-cache hit rate set to 50.0%, not verified: the engine exposes no prefix-cache "
            "counter");
  EXPECT_TRUE(std::isnan(v.prefix_hit_rate));
  in.during = PrefixScrapes(0, 0);
  EXPECT_EQ(JudgeValidity(in).verdict, schema::Validity::NOT_RECONCILED);
  // Without a target the same counters judge nothing.
  in.prefix_hit_rate_target = -1;
  in.during = PrefixScrapes(900, 1000);
  EXPECT_EQ(JudgeValidity(in).verdict, schema::Validity::VALID);
}

}  // namespace
}  // namespace servesweep::record
