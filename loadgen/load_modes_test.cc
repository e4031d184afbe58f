// Load modes: constant gaps, rate ramps (formulas and arrival statistics), duration mode with
// warm-up and drain, client queue time, time to first byte, multi-turn sessions and custom
// prompts, against the in-test SSE server where a server is needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "loadgen/arrival_schedule.h"
#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"
#include "loadgen/request_source.h"
#include "testing/test_sse_server.h"

namespace servesweep::loadgen {
namespace {

using testing::TestSseServer;

double MeanGapS(const std::vector<int64_t>& t) {
  return static_cast<double>(t.back() - t.front()) / 1e9 / static_cast<double>(t.size() - 1);
}

double GapCv(const std::vector<int64_t>& t) {
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(static_cast<double>(t[i] - t[i - 1]));
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
  double sq = 0;
  for (double g : gaps) sq += (g - mean) * (g - mean);
  return std::sqrt(sq / gaps.size()) / mean;
}

RateProfile Flat(double rate) {
  RateProfile p;
  p.rate_per_s = rate;
  return p;
}

TEST(ConstantArrivals, GapsAreExactlyOneOverTheRate) {
  const auto t = ScheduleNs(ArrivalKind::kConstant, 1, Flat(300), 1000, 7);
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i], std::llround(static_cast<double>(i) * 1e9 / 300)) << i;
  }
  EXPECT_DOUBLE_EQ(GapCv(ScheduleNs(ArrivalKind::kConstant, 1, Flat(40), 100, 1)), 0.0);
  // The seed plays no part: constant gaps are not random.
  EXPECT_EQ(t, ScheduleNs(ArrivalKind::kConstant, 1, Flat(300), 1000, 8));
}

TEST(ArrivalProcess, WithoutARampMatchesThePoissonAndGammaSchedules) {
  EXPECT_EQ(ScheduleNs(ArrivalKind::kPoisson, 1, Flat(50), 500, 3), PoissonScheduleNs(500, 50, 3));
  EXPECT_EQ(ScheduleNs(ArrivalKind::kGamma, 0.5, Flat(50), 500, 3),
            GammaScheduleNs(500, 50, 0.5, 3));
  EXPECT_EQ(ScheduleNs(ArrivalKind::kGamma, 1, Flat(50), 500, 3), PoissonScheduleNs(500, 50, 3));
}

TEST(ArrivalStatistics, MeanRateAndCoefficientOfVariation) {
  const uint32_t n = 20000;
  const double rate = 200;
  struct Case {
    ArrivalKind kind;
    double burstiness, cv;
  } cases[] = {{ArrivalKind::kPoisson, 1, 1.0},
               {ArrivalKind::kGamma, 0.25, 2.0},
               {ArrivalKind::kGamma, 4, 0.5},
               {ArrivalKind::kConstant, 1, 0.0}};
  for (const Case& c : cases) {
    const auto t = ScheduleNs(c.kind, c.burstiness, Flat(rate), n, 42);
    // Mean gap within 3% (Poisson: the sample mean's sd is 1/sqrt(n) = 0.7%).
    EXPECT_NEAR(MeanGapS(t) * rate, 1.0, c.cv * 0.03 + 1e-9) << c.burstiness;
    EXPECT_NEAR(GapCv(t), c.cv, 0.05 * c.cv + 1e-6) << c.burstiness;
  }
}

TEST(RateProfile, IntegratedRateAndItsInverseAgree) {
  for (RampKind ramp : {RampKind::kLinear, RampKind::kExponential}) {
    for (auto [r0, r1] : {std::pair{2.0, 50.0}, std::pair{50.0, 2.0}, std::pair{10.0, 10.0}}) {
      RateProfile p;
      p.ramp = ramp;
      p.start_rate_per_s = r0;
      p.end_rate_per_s = r1;
      p.ramp_start_s = 3;
      p.ramp_s = 20;
      for (double t : {0.0, 1.5, 3.0, 7.0, 13.0, 22.9, 23.0, 40.0}) {
        const double u = IntegratedRate(p, t);
        EXPECT_NEAR(InverseIntegratedRate(p, u), t, 1e-9 * (1 + t)) << r0 << " " << r1 << " " << t;
      }
      // The rate is the derivative of Lambda.
      for (double t : {1.0, 5.0, 12.5, 21.0, 30.0}) {
        const double h = 1e-5;
        const double slope = (IntegratedRate(p, t + h) - IntegratedRate(p, t - h)) / (2 * h);
        EXPECT_NEAR(slope, RateAt(p, t), 1e-5 * RateAt(p, t));
      }
      EXPECT_DOUBLE_EQ(RateAt(p, 0), r0);
      EXPECT_DOUBLE_EQ(RateAt(p, 23.5), r1);
    }
  }
  // Formulas by hand: linear 10 -> 30 over 10 s: Lambda(T) = 200; at 5 s the rate is 20.
  RateProfile lin{RampKind::kLinear, 0, 10, 30, 0, 10};
  EXPECT_DOUBLE_EQ(IntegratedRate(lin, 10), 200);
  EXPECT_DOUBLE_EQ(RateAt(lin, 5), 20);
  // Exponential 1 -> 100 over 10 s: at 5 s the geometric mean, 10/s.
  RateProfile exp_ramp{RampKind::kExponential, 0, 1, 100, 0, 10};
  EXPECT_NEAR(RateAt(exp_ramp, 5), 10, 1e-12);
  EXPECT_NEAR(IntegratedRate(exp_ramp, 10), 99 * 10 / std::log(100.0), 1e-9);
}

TEST(RampSecondsForCount, SpreadsTheCountOverTheRamp) {
  EXPECT_DOUBLE_EQ(RampSecondsForCount(RampKind::kLinear, 10, 30, 200), 10);
  const double t = RampSecondsForCount(RampKind::kExponential, 1, 100, 500);
  RateProfile p{RampKind::kExponential, 0, 1, 100, 0, t};
  EXPECT_NEAR(IntegratedRate(p, t), 500, 1e-9);
  EXPECT_DOUBLE_EQ(RampSecondsForCount(RampKind::kExponential, 5, 5, 100), 20);
}

// Constant arrivals on a ramp: each gap is 1 / r at the gap's middle (to within the rate's
// change over one gap), the first gap 1/r0 and the last near 1/r1.
TEST(RampArrivals, ConstantGapsFollowTheInstantaneousRate) {
  for (RampKind ramp : {RampKind::kLinear, RampKind::kExponential}) {
    const uint32_t n = 2000;
    RateProfile p;
    p.ramp = ramp;
    p.start_rate_per_s = 20;
    p.end_rate_per_s = 400;
    p.ramp_s = RampSecondsForCount(ramp, 20, 400, n);
    const auto t = ScheduleNs(ArrivalKind::kConstant, 1, p, n, 0);
    for (size_t i = 1; i < n; ++i) {
      const double a = t[i - 1] / 1e9, b = t[i] / 1e9;
      const double instant = 1.0 / (b - a);
      EXPECT_NEAR(instant, RateAt(p, (a + b) / 2), 0.01 * RateAt(p, (a + b) / 2) + 1e-6) << i;
    }
    // The ends: the first gap starts at r0 (and the rate grows within it), the last ends near r1.
    EXPECT_GT(1e9 / static_cast<double>(t[1] - t[0]), 20);
    EXPECT_LT(1e9 / static_cast<double>(t[1] - t[0]), 22);
    EXPECT_NEAR(1e9 / static_cast<double>(t[n - 1] - t[n - 2]), 400, 8);
    EXPECT_LT(t.back() / 1e9, p.ramp_s);  // all n fit inside the ramp
    EXPECT_NEAR(IntegratedRate(p, t.back() / 1e9), n - 1, 1e-3);
  }
}

// Poisson arrivals on a ramp: the counts in ten equal time bins match the integrated rate of
// each bin (an inhomogeneous Poisson process: count ~ Poisson(mean), within 4 sd).
TEST(RampArrivals, PoissonCountsPerBinMatchTheIntegratedRate) {
  for (RampKind ramp : {RampKind::kLinear, RampKind::kExponential}) {
    const uint32_t n = 40000;
    RateProfile p;
    p.ramp = ramp;
    p.start_rate_per_s = 500;
    p.end_rate_per_s = 5000;
    p.ramp_s = RampSecondsForCount(ramp, 500, 5000, n);
    const auto t = ScheduleNs(ArrivalKind::kPoisson, 1, p, n, 9);
    const int bins = 10;
    const double span = t.back() / 1e9;
    std::vector<int> counts(bins, 0);
    for (int64_t x : t) counts[std::min(bins - 1, static_cast<int>(x / 1e9 / span * bins))]++;
    for (int b = 0; b < bins - 1; ++b) {  // the last bin ends at the last arrival: skip it
      const double expected =
          IntegratedRate(p, span * (b + 1) / bins) - IntegratedRate(p, span * b / bins);
      EXPECT_NEAR(counts[b], expected, 4 * std::sqrt(expected)) << b;
    }
  }
}

TEST(RampArrivals, DescribeNamesShapeAndRamp) {
  RateProfile p{RampKind::kLinear, 0, 2, 20, 0, 30};
  EXPECT_EQ(DescribeArrivals(ArrivalKind::kConstant, 1, p),
            "constant ramp linear 2->20/s over 30 s");
  EXPECT_EQ(DescribeArrivals(ArrivalKind::kGamma, 0.5, Flat(3)), "gamma(burstiness=0.5)");
  EXPECT_EQ(DescribeArrivals(ArrivalKind::kPoisson, 1, Flat(3)), "poisson");
}

// --- Sources, without a server --------------------------------------------------------------

TEST(SessionSource, OpensAtMostConcurrencySessionsAndWaitsTheThinkTime) {
  LoadSettings s;
  s.api = Api::kChatCompletions;
  s.sessions = 3;
  s.turns = 2;
  s.concurrency = 2;
  s.think_time_s = 0.5;
  s.input_len_tok = 4;
  auto source = MakeSessionSource(s);
  RequestRecord a, b, c;
  RequestContent ca, cb, cc;
  ASSERT_EQ(source->NextDueNs(0), 0);
  source->Take(0, a, &ca);
  source->Take(0, b, &cb);
  EXPECT_EQ(source->NextDueNs(0), RequestSource::kNotYet);  // two sessions open: the cap
  EXPECT_EQ(a.session_id, 0);
  EXPECT_EQ(b.session_id, 1);
  EXPECT_EQ(a.turn, 0);
  ASSERT_EQ(ca.messages.size(), 1u);
  source->Finished(a, "answer zero", 1'000'000);
  // Session 0's next turn is due 0.5 s after its first ended.
  EXPECT_EQ(source->NextDueNs(2'000'000), 501'000'000);
  source->Take(501'000'000, c, &cc);
  EXPECT_EQ(c.session_id, 0);
  EXPECT_EQ(c.turn, 1);
  ASSERT_EQ(cc.messages.size(), 3u);  // user, assistant (as received), new user
  EXPECT_EQ(cc.messages[0], ca.messages[0]);
  EXPECT_EQ(cc.messages[1]["role"], "assistant");
  EXPECT_EQ(cc.messages[1]["content"], "answer zero");
  EXPECT_EQ(cc.messages[2]["role"], "user");
  source->Finished(c, "x", 600'000'000);  // session 0 closes: session 2 may open
  EXPECT_EQ(source->NextDueNs(600'000'000), 600'000'000);
  EXPECT_FALSE(source->Exhausted(600'000'000));
}

TEST(SessionSource, CompletionsConcatenateTheHistory) {
  LoadSettings s;
  s.sessions = 1;
  s.turns = 3;
  s.concurrency = 1;
  s.input_len_tok = 3;
  auto source = MakeSessionSource(s);
  RequestRecord r[3];
  RequestContent c[3];
  for (int k = 0; k < 3; ++k) {
    source->Take(source->NextDueNs(k * 10), r[k], &c[k]);
    ASSERT_TRUE(c[k].has_prompt_text);
    source->Finished(r[k], " t0 t1", k * 10 + 1);
  }
  EXPECT_EQ(c[1].prompt_text.rfind(c[0].prompt_text + " t0 t1\n", 0), 0u);
  EXPECT_EQ(c[2].prompt_text.rfind(c[1].prompt_text + " t0 t1\n", 0), 0u);
  EXPECT_TRUE(source->Exhausted(100));
}

TEST(SessionSource, ExponentialThinkTimeIsSeededAndHasTheMean) {
  LoadSettings s;
  s.sessions = 1;
  s.turns = 4001;
  s.input_len_tok = 1;
  s.concurrency = 1;
  s.think_time_s = 0.2;
  s.think_time_exponential = true;
  s.seed = 5;
  auto run = [&] {
    auto source = MakeSessionSource(s);
    std::vector<int64_t> thinks;
    int64_t now = 0;
    for (uint32_t k = 0; k < s.turns; ++k) {
      const int64_t due = source->NextDueNs(now);
      if (k > 0) thinks.push_back(due - now);
      RequestRecord r;
      RequestContent c;
      source->Take(due, r, &c);
      now = due + 1000;
      source->Finished(r, "", now);
    }
    return thinks;
  };
  const auto a = run();
  EXPECT_EQ(a, run());
  const double mean_s = std::accumulate(a.begin(), a.end(), 0.0) / a.size() / 1e9;
  EXPECT_NEAR(mean_s, 0.2, 0.2 * 0.05);
}

TEST(CustomContent, PromptAndMessagesBothShapes) {
  RequestContent c;
  FillCustomContent({"one two three", "", 7}, 16, &c);
  EXPECT_EQ(c.prompt_text, "one two three");
  EXPECT_EQ(c.output_len_tok, 7u);
  EXPECT_EQ(c.input_len_tok, 3u);
  EXPECT_EQ(c.messages, nlohmann::json::parse(R"([{"role":"user","content":"one two three"}])"));
  RequestContent m;
  FillCustomContent(
      {"", R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi"}])", 0}, 16,
      &m);
  EXPECT_EQ(m.output_len_tok, 16u);
  EXPECT_EQ(m.prompt_text, "be brief\nhi");
  EXPECT_EQ(m.messages.size(), 2u);
}

// --- Against the in-test server ---------------------------------------------------------------

LoadSettings Base(const TestSseServer& server, const std::string& model) {
  LoadSettings s;
  s.base_url = server.base_url();
  s.model = model;
  s.input_len_tok = 8;
  s.output_len_tok = 4;
  s.seed = 3;
  s.request_timeout_s = 10;
  return s;
}

TEST(DurationMode, WarmupWindowAndWindowThroughput) {
  TestSseServer server(2000);  // 2 ms per token
  LoadSettings s = Base(server, "ok");
  s.concurrency = 2;
  s.warmup_s = 0.2;
  s.duration_s = 0.4;
  s.num_requests = 0;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  EXPECT_EQ(res.window_start_ns, 200'000'000);
  EXPECT_EQ(res.window_end_ns, 600'000'000);
  uint32_t warm = 0, measured = 0;
  for (const RequestRecord& r : res.requests) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_LT(r.scheduled_ns, res.window_end_ns);  // nothing scheduled after the window
    EXPECT_EQ(r.warmup, r.scheduled_ns < res.window_start_ns);
    (r.warmup ? warm : measured)++;
  }
  EXPECT_GT(warm, 2u);
  EXPECT_GT(measured, 4u);
  const BenchSummary sum = Summarize(res);
  EXPECT_EQ(sum.completed, measured);
  EXPECT_DOUBLE_EQ(sum.window_s, 0.4);
  // By hand: the chunks inside the window, over its length.
  uint64_t tokens = 0, prompts = 0;
  for (const RequestRecord& r : res.requests) {
    for (int64_t t : r.chunk_times_ns) tokens += t >= 200'000'000 && t < 600'000'000;
    if (r.first_token_ns >= 200'000'000 && r.first_token_ns < 600'000'000)
      prompts += r.prompt_tokens;
  }
  EXPECT_GT(tokens, 0u);
  EXPECT_DOUBLE_EQ(sum.window_output_throughput, tokens / 0.4);
  EXPECT_DOUBLE_EQ(sum.window_total_token_throughput, (tokens + prompts) / 0.4);
  // Whole run: from the window start to the last measured completion.
  int64_t last = 0;
  for (const RequestRecord& r : res.requests) {
    if (!r.warmup) last = std::max(last, r.done_ns);
  }
  EXPECT_DOUBLE_EQ(res.duration_s, (last - 200'000'000) / 1e9);
}

TEST(DurationMode, OpenLoopConstantArrivalsStopAtTheWindowEnd) {
  TestSseServer server(500);
  LoadSettings s = Base(server, "ok");
  s.concurrency = 0;
  s.request_rate_per_s = 50;
  s.arrival = ArrivalKind::kConstant;
  s.warmup_s = 0.1;
  s.duration_s = 0.3;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  // Arrivals at 0, 20, ..., 380 ms: 5 warm-up (< 100 ms), 15 measured.
  ASSERT_EQ(res.requests.size(), 20u);
  for (size_t i = 0; i < res.requests.size(); ++i) {
    EXPECT_EQ(res.requests[i].scheduled_ns, static_cast<int64_t>(i) * 20'000'000);
    EXPECT_EQ(res.requests[i].warmup, i < 5);
  }
  EXPECT_EQ(Summarize(res).completed, 15u);
}

TEST(Drain, RequestsStillInFlightAreCancelledAndCounted) {
  TestSseServer server;
  LoadSettings s = Base(server, "hang");
  s.concurrency = 3;
  s.num_requests = 3;
  s.drain_timeout_s = 0.3;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  ASSERT_EQ(res.requests.size(), 3u);
  for (const RequestRecord& r : res.requests) {
    EXPECT_TRUE(r.cancelled);
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("cancelled"), std::string::npos) << r.error;
    EXPECT_GE(r.done_ns - r.start_ns, 300'000'000);
    EXPECT_LT(r.done_ns - r.start_ns, 2'000'000'000);
  }
  const BenchSummary sum = Summarize(res);
  EXPECT_EQ(sum.failed, 3u);
  EXPECT_EQ(sum.cancelled, 3u);
  EXPECT_EQ(sum.completed, 0u);
}

TEST(Drain, AppliesToTheLastTurnsOfSessions) {
  TestSseServer server;
  LoadSettings s = Base(server, "hang");
  s.sessions = 2;
  s.turns = 1;
  s.concurrency = 2;
  s.drain_timeout_s = 0.2;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  ASSERT_EQ(res.requests.size(), 2u);
  for (const RequestRecord& r : res.requests) EXPECT_TRUE(r.cancelled) << r.error;
}

TEST(ClientQueue, OpenLoopWithACapQueuesAndReportsIt) {
  TestSseServer server(5000);  // 4 tokens x 5 ms: ~20 ms per request
  LoadSettings s = Base(server, "ok");
  s.concurrency = 0;
  s.max_in_flight = 1;
  s.request_rate_per_s = 1000;  // all due within a few ms, one in flight
  s.arrival = ArrivalKind::kConstant;
  s.num_requests = 6;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  const BenchSummary sum = Summarize(res);
  ASSERT_EQ(sum.completed, 6u);
  EXPECT_EQ(sum.client_queue_ms.count, 6u);
  // The last request waited for five requests of ~20 ms each, minus its 5 ms offset.
  const RequestRecord& last = res.requests.back();
  EXPECT_GT(last.start_ns - last.scheduled_ns, 60'000'000);
  EXPECT_NEAR(sum.client_queue_ms.max, (last.start_ns - last.scheduled_ns) / 1e6, 1e-9);
  // TTFB: the body's first byte, no later than the first token.
  EXPECT_EQ(sum.ttfb_ms.count, 6u);
  for (const RequestRecord& r : res.requests) {
    EXPECT_GT(r.first_byte_ns, r.start_ns);
    EXPECT_LE(r.first_byte_ns, r.first_token_ns);
  }
}

TEST(Sessions, RunAgainstAServerAndCarryTheHistory) {
  TestSseServer server(200);
  LoadSettings s = Base(server, "ok");
  s.api = Api::kChatCompletions;
  s.sessions = 2;
  s.turns = 3;
  s.concurrency = 2;
  s.think_time_s = 0.05;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  ASSERT_EQ(res.requests.size(), 6u);
  std::vector<std::vector<const RequestRecord*>> by_session(2);
  for (const RequestRecord& r : res.requests) {
    ASSERT_TRUE(r.success) << r.error;
    by_session.at(r.session_id).push_back(&r);
  }
  for (const auto& turns : by_session) {
    ASSERT_EQ(turns.size(), 3u);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(turns[k]->turn, k);
    for (int k = 1; k < 3; ++k) {
      EXPECT_GE(turns[k]->start_ns - turns[k - 1]->done_ns, 50'000'000);
    }
  }
}

TEST(Validation, RejectsInconsistentModes) {
  LoadResult unused;
  LoadSettings s;
  s.base_url = "http://127.0.0.1:1";
  s.concurrency = 1;
  s.warmup_s = 1;
  EXPECT_EQ(RunLoad(s, &unused).code(),
            StatusCode::kInvalidArgument);  // warmup_s without duration_s
  s.warmup_s = 0;
  s.ramp = RampKind::kLinear;
  s.ramp_start_rate_per_s = 0;
  s.ramp_end_rate_per_s = 5;
  EXPECT_EQ(RunLoad(s, &unused).code(), StatusCode::kInvalidArgument);
  s.ramp = RampKind::kNone;
  s.duration_s = 1;
  s.request_rate_per_s = std::numeric_limits<double>::infinity();
  EXPECT_EQ(RunLoad(s, &unused).code(), StatusCode::kInvalidArgument);  // would send without end
  s.duration_s = 0;
  s.request_rate_per_s = 0;
  s.sessions = 2;
  s.turns = 0;
  EXPECT_EQ(RunLoad(s, &unused).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace servesweep::loadgen
