// The early-stop judge at its edges: the slope and its confidence bound, stability by windows
// (tolerance, the latency floor, the minimum count), over-saturation of a queue that grows
// against one that does not (and a growth too slow to matter), the time cap; then RunLoad
// stopping a real load against the in-test SSE server.
#include "loadgen/early_stop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "loadgen/early_stop_source.h"
#include "loadgen/load_generator.h"
#include "testing/test_sse_server.h"

namespace servesweep::loadgen {
namespace {

TEST(SlidingSlope, FitsALineExactlyAndForgetsWhatSlidesOut) {
  SlidingSlope s;
  for (int i = 0; i < 10; ++i) s.Add(i, 2.0 * i + 1);
  auto fit = s.Fitted();
  EXPECT_EQ(fit.n, 10u);
  EXPECT_NEAR(fit.slope, 2.0, 1e-9);
  EXPECT_NEAR(fit.slope_low, 2.0, 1e-6);  // no scatter: the bound is the slope
  EXPECT_NEAR(fit.mean_y, 10.0, 1e-9);
  EXPECT_DOUBLE_EQ(fit.span_x, 9);
  // The rising points slide out; flat ones stay.
  for (int i = 10; i < 20; ++i) s.Add(i, 5);
  s.DropBefore(10);
  fit = s.Fitted();
  EXPECT_EQ(fit.n, 10u);
  EXPECT_NEAR(fit.slope, 0, 1e-9);
  // Two points say nothing of a slope.
  SlidingSlope two;
  two.Add(0, 0);
  two.Add(1, 1);
  EXPECT_EQ(two.Fitted().slope_low, 0);
}

TEST(SlidingSlope, ScatterAroundAFlatLineHasANegativeLowerBound) {
  SlidingSlope s;
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(1.0, 0.2);
  for (int i = 0; i < 200; ++i) s.Add(i * 0.1, noise(rng));
  const auto fit = s.Fitted();
  EXPECT_LT(fit.slope_low, 0);
  EXPECT_GT(fit.slope_low, -0.05);
}

workload::EarlyStopSettings Stable(double tolerance_pct, uint32_t min_requests) {
  workload::EarlyStopSettings s;
  s.stable = true;
  s.tolerance_pct = tolerance_pct;
  s.windows = 3;
  s.window_requests = 20;
  s.min_requests = min_requests;
  return s;
}

// Completions every 10 ms with TTFT `ttft_s(i)`; judged after each. Returns the verdict.
template <typename Ttft>
StopVerdict FeedSteady(EarlyStopJudge& judge, uint32_t count, Ttft ttft_s) {
  for (uint32_t i = 0; i < count; ++i) {
    EarlyStopJudge::Ended e;
    e.t_s = 0.01 * (i + 1);
    e.success = true;
    e.output_tokens = 100;
    e.ttft_s = ttft_s(i);
    e.first_token_s = e.t_s - 0.5;
    e.due_to_first_token_s = e.ttft_s;
    e.tpot_s = 0.005;
    e.e2e_s = 0.5;
    e.in_flight = 50;  // a completion every 10 ms of 0.5 s each: 50 in flight (Little)
    judge.End(e);
    const StopVerdict& v = judge.Judge(e.t_s);
    if (v.reason != StopReason::kNone) return v;
  }
  return StopVerdict{};
}

TEST(EarlyStopStable, StopsAtTheMinimumCountWhenEveryWindowAgrees) {
  EarlyStopJudge judge(Stable(5, 200), false);
  const StopVerdict v = FeedSteady(judge, 1000, [](uint32_t) { return 0.050; });
  EXPECT_EQ(v.reason, StopReason::kStable);
  EXPECT_EQ(v.completed, 200u);  // the first completion at which it may stop
  EXPECT_NE(v.evidence.find("the last 3 windows of 20 requests agree within 5%"), std::string::npos)
      << v.evidence;
}

TEST(EarlyStopStable, ADriftStopsItUntilTheDriftIsWithinTheTolerance) {
  // TTFT drifts 0.1 ms per request: the first and last windows' p50s are 4 ms apart, which is
  // 3% of their mean once that reaches 133.3 ms, at the 365th completion (judged every 5).
  auto drift = [](uint32_t i) { return 0.100 + 0.0001 * i; };
  EarlyStopJudge judge(Stable(3, 0), false);
  const StopVerdict v = FeedSteady(judge, 1000, drift);
  EXPECT_EQ(v.reason, StopReason::kStable);
  EXPECT_EQ(v.completed, 365u) << v.evidence;
  // At 5% it holds from the first judgement: 3 windows of 20 and the one that opens them.
  EarlyStopJudge loose(Stable(5, 0), false);
  EXPECT_EQ(FeedSteady(loose, 1000, drift).completed, 65u);
}

TEST(EarlyStopStable, LatenciesWithinAMillisecondAgreeWhateverTheirRatio) {
  // 2 ms drifting 0.01 ms per request: 0.4 ms across the windows, 17% of 2.3 ms, under 1 ms.
  EarlyStopJudge judge(Stable(5, 0), false);
  EXPECT_EQ(FeedSteady(judge, 1000, [](uint32_t i) { return 0.002 + 0.00001 * i; }).completed, 65u);
  // 0.03 ms per request: 1.2 ms apart, over the floor, and 5% of the mean only at 24 ms.
  EarlyStopJudge apart(Stable(5, 0), false);
  EXPECT_EQ(FeedSteady(apart, 700, [](uint32_t i) { return 0.002 + 0.00003 * i; }).reason,
            StopReason::kNone);
}

workload::EarlyStopSettings Oversaturation() {
  workload::EarlyStopSettings s;  // the defaults: min_s 10, window_s 30, min_growth 0.1
  s.oversaturated = true;
  return s;
}

// An open loop into one server: arrivals every `gap_s` (Poisson when `poisson`), service
// `service_s` each, first token 50 ms into service. Judged at every event; the verdict and the
// time it came.
StopVerdict SimulateQueue(double gap_s, double service_s, bool poisson, bool watch_in_flight,
                          double horizon_s) {
  EarlyStopJudge judge(Oversaturation(), watch_in_flight);
  std::mt19937 rng(7);
  std::exponential_distribution<double> gap(1 / gap_s);
  std::vector<double> arrivals;
  for (double t = 0; t < horizon_s; t += poisson ? gap(rng) : gap_s) arrivals.push_back(t);
  // Single server, first come first served.
  std::vector<double> starts(arrivals.size());
  double free_at = 0;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    starts[i] = std::max(arrivals[i], free_at);
    free_at = starts[i] + service_s;
  }
  size_t sent = 0, ended = 0;
  while (sent < arrivals.size() || ended < sent) {
    const double next_send = sent < arrivals.size() ? arrivals[sent] : INFINITY;
    const double next_end = ended < sent ? starts[ended] + service_s : INFINITY;
    if (std::min(next_send, next_end) > horizon_s) break;
    if (next_send <= next_end) {
      ++sent;
      judge.Sent(next_send, static_cast<uint32_t>(sent - ended));
      if (judge.Judge(next_send).reason != StopReason::kNone) return judge.Judge(next_send);
    } else {
      EarlyStopJudge::Ended e;
      e.t_s = next_end;
      e.in_flight = static_cast<uint32_t>(sent - ended - 1);
      e.success = true;
      e.output_tokens = 10;
      e.first_token_s = starts[ended] + 0.05;
      e.due_to_first_token_s = e.first_token_s - arrivals[ended];
      e.ttft_s = e.due_to_first_token_s;
      judge.End(e);
      ++ended;
      if (judge.Judge(next_end).reason != StopReason::kNone) return judge.Judge(next_end);
    }
  }
  return StopVerdict{};
}

TEST(EarlyStopOversaturated, AQueueThatKeepsGrowingIsCaughtSoonAfterTheMinimumTime) {
  // 12.5 arrivals/s into a server of 10/s (rho 1.25): the wait grows by 0.25 s per second.
  const StopVerdict v = SimulateQueue(0.08, 0.1, /*poisson=*/true, true, 120);
  ASSERT_EQ(v.reason, StopReason::kOversaturated);
  EXPECT_GE(v.at_s, 15.0);  // never before half a window of evidence (and min_s)
  EXPECT_LT(v.at_s, 20.0);
  EXPECT_NE(v.evidence.find("requests in flight grew"), std::string::npos) << v.evidence;
}

TEST(EarlyStopOversaturated, ABusyButStableQueueIsNeverCalledOversaturated) {
  // 80% load, Poisson arrivals: noisy queues, but no growth over two minutes (its warm-up
  // transient from an empty queue included). bench/early_stop_detection measures the rates.
  EXPECT_EQ(SimulateQueue(0.125, 0.1, true, true, 120).reason, StopReason::kNone);
  EXPECT_EQ(SimulateQueue(0.125, 0.1, true, false, 120).reason, StopReason::kNone);
  // Constant arrivals just under capacity: no queue at all.
  EXPECT_EQ(SimulateQueue(0.101, 0.1, false, true, 120).reason, StopReason::kNone);
}

// A closed loop whose delay rises as `delay_s(t)`, a completion every 10 ms.
StopReason ClosedLoop(double (*delay_s)(double)) {
  EarlyStopJudge judge(Oversaturation(), /*watch_in_flight=*/false);
  for (int i = 1; i <= 6000; ++i) {
    EarlyStopJudge::Ended e;
    e.t_s = 0.01 * i;
    e.success = true;
    e.first_token_s = e.t_s;
    e.due_to_first_token_s = delay_s(e.t_s);
    judge.End(e);
    if (judge.Judge(e.t_s).reason != StopReason::kNone) return judge.Judge(e.t_s).reason;
  }
  return StopReason::kNone;
}

TEST(EarlyStopOversaturated, AGrowthIsJudgedByItsRateAgainstMinGrowth) {
  EXPECT_EQ(ClosedLoop([](double t) { return 0.1 + 0.11 * t; }), StopReason::kOversaturated);
  // A certain growth, but of 0.09 s per s: under min_growth (0.1).
  EXPECT_EQ(ClosedLoop([](double t) { return 0.1 + 0.09 * t; }), StopReason::kNone);
  EXPECT_EQ(ClosedLoop([](double) { return 0.5; }), StopReason::kNone);
}

TEST(EarlyStopMaxDuration, EndsThePhaseAtTheCapAndTheVerdictStays) {
  workload::EarlyStopSettings s;
  s.max_duration_s = 30;
  EarlyStopJudge judge(s, false);
  EXPECT_EQ(judge.Judge(29.99).reason, StopReason::kNone);
  const StopVerdict& v = judge.Judge(30);
  EXPECT_EQ(v.reason, StopReason::kMaxDuration);
  EXPECT_DOUBLE_EQ(v.at_s, 30);
  EXPECT_DOUBLE_EQ(judge.Judge(45).at_s, 30);  // once given, it stays
}

// An open loop whose prefill is one server (arrivals every 80 ms, 100 ms each: rho 1.25) and
// whose requests then decode for `decode_s` in parallel: each request's delay is learned only
// when it ends, decode_s after its first token. The verdict and the records, as the load loop
// would have kept them (ns from t0).
StopVerdict PrefillQueueWithLongDecodes(double decode_s, std::vector<RequestRecord>* records) {
  constexpr double kGapS = 0.08, kPrefillS = 0.1;
  EarlyStopJudge judge(Oversaturation(), /*watch_in_flight=*/true);
  auto ns = [](double s) { return static_cast<int64_t>(std::llround(s * 1e9)); };
  struct Event {
    double t_s;
    bool send;
    size_t i;
  };
  std::vector<Event> events;
  double free_at = 0;
  for (size_t i = 0; i * kGapS < 200; ++i) {
    RequestRecord r;
    r.index = static_cast<uint32_t>(i);
    r.success = true;
    r.output_tokens = 100;
    const double due = i * kGapS, first = std::max(due, free_at) + kPrefillS;
    free_at = first;
    r.scheduled_ns = r.start_ns = r.sent_ns = ns(due);
    r.first_token_ns = ns(first);
    r.end_ns = r.done_ns = ns(first + decode_s);
    records->push_back(r);
    events.push_back({due, true, i});
    events.push_back({first + decode_s, false, i});
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.t_s != b.t_s ? a.t_s < b.t_s : (!a.send && b.send);
  });
  // As EarlyStopSource judges: before each send, after each end, on the loop's ns clock.
  uint32_t in_flight = 0;
  for (const Event& e : events) {
    const int64_t t_ns = ns(e.t_s);
    if (!e.send) judge.End(EndedOf((*records)[e.i], --in_flight, t_ns, 0));
    const StopVerdict& v = judge.Judge(t_ns / 1e9);
    if (v.reason != StopReason::kNone) return v;
    if (e.send) judge.Sent(t_ns / 1e9, ++in_flight);
  }
  return StopVerdict{};
}

// A delay is learned at its request's end: requests that decode for longer than half the
// window (30 s) were never judged, however fast their queue grew (found by plan --simulate on
// an 8B model at 200 requests/s: 23 s decodes, 100 s queues, never called over-saturated).
TEST(EarlyStopOversaturated, RequestsThatDecodeLongerThanTheWindowAreStillJudged) {
  for (double decode_s : {0.5, 20.0, 40.0}) {
    std::vector<RequestRecord> records;
    const StopVerdict v = PrefillQueueWithLongDecodes(decode_s, &records);
    EXPECT_EQ(v.reason, StopReason::kOversaturated) << decode_s << " s: " << v.evidence;
    // From min_s (10) on, once half a window of first tokens is known.
    EXPECT_LT(v.at_s, 10 + decode_s + 30) << decode_s;
  }
}

// The judge after the fact sees what the loop saw: the same verdict at the same time, and where
// the phase would have stopped.
TEST(EarlyStopAfterTheFact, GivesTheLoopsVerdictAndWhereItStopped) {
  std::vector<RequestRecord> records;
  const StopVerdict live = PrefillQueueWithLongDecodes(20, &records);
  int64_t stopped_at_ns = 0;
  const StopVerdict replayed =
      JudgeAfterTheFact(records, Oversaturation(), true, 0, &stopped_at_ns);
  EXPECT_EQ(replayed.reason, StopReason::kOversaturated);
  EXPECT_DOUBLE_EQ(replayed.at_s, live.at_s);
  EXPECT_EQ(replayed.evidence, live.evidence);
  EXPECT_EQ(stopped_at_ns, std::llround(live.at_s * 1e9));
  // A phase that never stops: -1, no verdict.
  workload::EarlyStopSettings cap;
  cap.max_duration_s = 1000;
  const StopVerdict none = JudgeAfterTheFact(records, cap, true, 0, &stopped_at_ns);
  EXPECT_EQ(none.reason, StopReason::kNone);
  EXPECT_EQ(stopped_at_ns, -1);
  // The time cap holds at its own time, between two events; measured from the given start.
  cap.max_duration_s = 7.01;
  const StopVerdict capped = JudgeAfterTheFact(records, cap, true, 2'000'000'000, &stopped_at_ns);
  EXPECT_EQ(capped.reason, StopReason::kMaxDuration);
  EXPECT_EQ(stopped_at_ns, 9'010'000'000);
  EXPECT_DOUBLE_EQ(capped.at_s, 7.01);
}

// A closed loop of 4 slots: at the stable verdict, the slot that just freed does not send again
// (an end before a send at equal times), so 3 requests are in flight when it stops.
TEST(EarlyStopAfterTheFact, AClosedLoopStopsAtItsVerdictWithTheSlotThatFreedUnsent) {
  std::vector<RequestRecord> records;
  for (uint32_t i = 0; i < 400; ++i) {
    const int64_t slot_start = int64_t{i / 4} * 100'000'000 + int64_t{i % 4} * 25'000'000;
    RequestRecord r;
    r.index = i;
    r.success = true;
    r.output_tokens = 10;
    r.scheduled_ns = r.start_ns = r.sent_ns = slot_start;
    r.first_token_ns = slot_start + 20'000'000;
    r.end_ns = r.done_ns = slot_start + 100'000'000;
    records.push_back(r);
  }
  workload::EarlyStopSettings s = Stable(5, 60);
  int64_t stopped_at_ns = 0;
  const StopVerdict v = JudgeAfterTheFact(records, s, false, 0, &stopped_at_ns);
  ASSERT_EQ(v.reason, StopReason::kStable) << v.evidence;
  // Three windows of 20 need the completion before them (61); judged from 60, then every 5.
  EXPECT_EQ(v.completed, 65u);
  size_t sent = 0;
  for (const auto& r : records) sent += r.start_ns < stopped_at_ns;
  EXPECT_EQ(sent, 68u);
}

// Eight-token prompts and answers against `server`.
LoadSettings ShortRequestsTo(const testing::TestSseServer& server) {
  LoadSettings s;
  s.base_url = server.base_url();
  s.model = "ok";
  s.input_len_tok = 8;
  s.output_len_tok = 8;
  return s;
}

// Through RunLoad, against a real HTTP/SSE server: a steady closed loop stops once stable,
// its in-flight requests finish and stay measured; a duration-mode window ends at the cap.
TEST(EarlyStopLoad, AStableClosedLoopStopsAtItsMinimumCountAndKeepsWhatWasInFlight) {
  testing::TestSseServer server(500);
  LoadSettings s = ShortRequestsTo(server);
  s.concurrency = 4;
  s.num_requests = 5000;
  s.early_stop.stable = true;
  s.early_stop.tolerance_pct = 60;  // a shared test machine: the rule, not the noise, is tested
  s.early_stop.window_requests = 10;
  s.early_stop.min_requests = 100;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  EXPECT_EQ(res.stopped, StopReason::kStable) << res.stop_evidence;
  EXPECT_GE(res.requests.size(), 100u);
  EXPECT_LT(res.requests.size(), 1000u);  // far short of 5,000 (100 + 4 on a quiet machine)
  for (const auto& r : res.requests) EXPECT_TRUE(r.success) << r.error;
  EXPECT_GT(res.stopped_at_s, 0);
  EXPECT_NE(res.stop_evidence.find("output tok/s"), std::string::npos);
}

TEST(EarlyStopLoad, ADurationWindowEndsAtTheCap) {
  testing::TestSseServer server(500);
  LoadSettings s = ShortRequestsTo(server);
  s.concurrency = 2;
  s.warmup_s = 0.1;
  s.duration_s = 30;
  s.early_stop.max_duration_s = 0.3;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  EXPECT_EQ(res.stopped, StopReason::kMaxDuration);
  EXPECT_GE(res.window_end_ns, 400'000'000);
  EXPECT_LT(res.window_end_ns, 1'000'000'000);
  EXPECT_LT(res.duration_s, 2.0);
  for (const auto& r : res.requests) EXPECT_LT(r.scheduled_ns, res.window_end_ns);
}

}  // namespace
}  // namespace servesweep::loadgen
