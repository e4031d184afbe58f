// Diagnosis rules (report/diagnosis.h): for each, a fixture where it fires (naming the
// figures) and one where it does not.
#include "report/diagnosis.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::report {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Diagnosis, TtftGrowsWithPromptLengthFiresOnAPrefillBoundRun) {
  // TTFT = 10 ms + prompt / 10k tok/s: 100 tok -> 20 ms, 4000 tok -> 410 ms.
  std::vector<PromptTtft> requests;
  for (int i = 0; i < 16; ++i) {
    const double prompt = i < 8 ? 100 : 4000;
    requests.push_back({prompt, 10 + prompt / 10});
  }
  const auto f = TtftGrowsWithPromptLength("run a", requests, {0.25, 3, 10});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->subject, "run a");
  EXPECT_TRUE(Has(f->evidence,
                  "median TTFT 410.0 ms for the longest quarter of prompts (mean 4000 "
                  "tok) vs 20.0 ms for the shortest (mean 100 tok)"))
      << f->evidence;
  EXPECT_TRUE(Has(f->evidence, "marginal prefill rate 10000 tok/s")) << f->evidence;
  EXPECT_TRUE(Has(f->evidence, "prefix-cache hit rate 25%")) << f->evidence;
  EXPECT_TRUE(Has(f->causes, "prefill rate")) << f->causes;
}

TEST(Diagnosis, TtftGrowsWithPromptLengthStaysQuietWhenTtftIsFlatOrLengthsFixed) {
  std::vector<PromptTtft> flat, fixed;
  for (int i = 0; i < 16; ++i) {
    flat.push_back({i < 8 ? 100.0 : 4000.0, 50.0 + (i % 3)});
    fixed.push_back({512, 20.0 + i * 5});  // TTFT varies, prompts do not
  }
  const PrefillSignals none{std::nan(""), std::nan(""), 0};
  EXPECT_FALSE(TtftGrowsWithPromptLength("r", flat, none).has_value());
  EXPECT_FALSE(TtftGrowsWithPromptLength("r", fixed, none).has_value());
  EXPECT_FALSE(TtftGrowsWithPromptLength("r", {{1, 1}, {1000, 500}}, none).has_value());
}

TEST(Diagnosis, DecodeSlowAtConcurrencyOneAgainstRooflineOrThreshold) {
  const auto vs_roofline = DecodeSlowAtConcurrencyOne("tp=1", 30, 12.0);
  ASSERT_TRUE(vs_roofline.has_value());
  EXPECT_TRUE(Has(vs_roofline->evidence,
                  "median TPOT 30.00 ms at concurrency 1 (33.3 tok/s per "
                  "user) is 2.5x the performance model's roofline "
                  "estimate of 12.00 ms"))
      << vs_roofline->evidence;
  EXPECT_FALSE(DecodeSlowAtConcurrencyOne("tp=1", 15, 12.0).has_value());
  const auto vs_threshold = DecodeSlowAtConcurrencyOne("cpu", 80, std::nullopt);
  ASSERT_TRUE(vs_threshold.has_value());
  EXPECT_TRUE(Has(vs_threshold->evidence, "is above 50 ms")) << vs_threshold->evidence;
  EXPECT_FALSE(DecodeSlowAtConcurrencyOne("gpu", 30, std::nullopt).has_value());
  EXPECT_FALSE(DecodeSlowAtConcurrencyOne("gpu", std::nan(""), std::nullopt).has_value());
}

CurveRun Point(double level, std::map<std::string, double> figures) {
  return {"c", level, std::move(figures), std::nullopt};
}

Curve PlateauCurve(double kv_max, double preemptions, double running_max, double waiting_max) {
  std::vector<CurveRun> runs;
  const std::vector<double> levels = {1, 2, 4, 8, 16, 32};
  for (double level : levels) {
    runs.push_back(Point(level, {{"output_throughput", 100 * std::min(level, 8.0)},
                                 {"kv_cache_usage_max", kv_max * std::min(1.0, level / 8)},
                                 {"preemptions", level >= 16 ? preemptions : 0},
                                 {"running_max", std::min(level, running_max)},
                                 {"waiting_max", level >= 16 ? waiting_max : 0}}));
  }
  return BuildCurves(runs)[0];
}

Knee KneeOf(const Curve& curve) {
  std::vector<double> levels, throughput;
  for (const auto& p : curve.points) {
    levels.push_back(p.level);
    throughput.push_back(p.Median("output_throughput"));
  }
  return FindKnee(levels, throughput);
}

TEST(Diagnosis, ThroughputPlateauNamesKvCapacityBatchingOrBandwidth) {
  const Curve kv = PlateauCurve(0.99, 12, 32, 20);
  const auto full = ThroughputPlateaus("tp=1", kv, KneeOf(kv));
  ASSERT_TRUE(full.has_value());
  EXPECT_TRUE(Has(full->evidence,
                  "output throughput 800.0 tok/s at 8 (the knee) and 800.0 tok/s "
                  "at 32; KV usage max 99% at 32; preemptions 12"))
      << full->evidence;
  EXPECT_TRUE(Has(full->causes, "KV capacity")) << full->causes;

  const Curve capped = PlateauCurve(0.40, 0, 8, 24);
  const auto batching = ThroughputPlateaus("tp=1", capped, KneeOf(capped));
  ASSERT_TRUE(batching.has_value());
  EXPECT_TRUE(Has(batching->causes, "at most 8 of 32 requests ran at once")) << batching->causes;

  const Curve bound = PlateauCurve(0.40, 0, 32, 0);
  const auto bandwidth = ThroughputPlateaus("tp=1", bound, KneeOf(bound));
  ASSERT_TRUE(bandwidth.has_value());
  EXPECT_TRUE(Has(bandwidth->causes, "memory bandwidth")) << bandwidth->causes;
}

TEST(Diagnosis, ThroughputPlateauStaysQuietOnALinearCurve) {
  std::vector<CurveRun> runs;
  for (double level : {1, 2, 4, 8})
    runs.push_back(Point(level, {{"output_throughput", 50 * level}}));
  const Curve linear = BuildCurves(runs)[0];
  EXPECT_FALSE(ThroughputPlateaus("c", linear, KneeOf(linear)).has_value());
}

TEST(Diagnosis, P95RisingSteeplyWhileOutputImprovesFires) {
  std::vector<CurveRun> runs = {
      Point(8, {{"output_throughput", 800}, {"e2el_p95_ms", 1000}, {"e2el_median_ms", 900}}),
      Point(16, {{"output_throughput", 960},
                 {"e2el_p95_ms", 3000},
                 {"e2el_median_ms", 1200},
                 {"waiting_max", 6}}),
  };
  const auto f = P95RisesWhileOutputImproves("c", BuildCurves(runs)[0]);
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(Has(f->evidence,
                  "from 8 to 16: p95 E2E 1000 -> 3000 ms (3.0x) while output "
                  "throughput 800 -> 960 tok/s (+20%); waiting max 6; p95/p50 E2E "
                  "2.5"))
      << f->evidence;
  EXPECT_TRUE(Has(f->causes, "queueing")) << f->causes;
  EXPECT_TRUE(Has(f->causes, "request-length mix")) << f->causes;
}

TEST(Diagnosis, P95GrowingInProportionToOutputIsQuiet) {
  // Throughput doubles and p95 grows 1.6x (less than twice the +100% gain): healthy batching.
  std::vector<CurveRun> runs = {
      Point(8, {{"output_throughput", 400}, {"e2el_p95_ms", 1000}}),
      Point(16, {{"output_throughput", 800}, {"e2el_p95_ms", 1600}}),
      Point(32, {{"output_throughput", 810}, {"e2el_p95_ms", 3300}}),  // output flat: rule 3's
  };
  EXPECT_FALSE(P95RisesWhileOutputImproves("c", BuildCurves(runs)[0]).has_value());
}

TEST(Diagnosis, LongPromptsEvictFiresWhenPreemptionsFollowLongAdmissions) {
  // Counter rises in (2 s, 3 s]; the requests admitted then have 6000-token prompts, the run's
  // others 500.
  const std::vector<CounterSample> preemptions = {
      {1'000'000'000, 0}, {2'000'000'000, 0}, {3'000'000'000, 4}, {4'000'000'000, 4}};
  std::vector<RequestStart> requests;
  for (int i = 0; i < 10; ++i) requests.push_back({500'000'000 + i * 150'000'000, 500});
  requests.push_back({2'500'000'000, 6000});
  requests.push_back({2'600'000'000, 6000});
  const auto f = LongPromptsEvict("run b", preemptions, requests, 0.97);
  ASSERT_TRUE(f.has_value());
  // Only the two long prompts start in (2 s, 3 s]; the run's mean is (10 x 500 + 2 x 6000) / 12.
  EXPECT_TRUE(Has(f->evidence,
                  "4 preemption(s); the 2 request(s) admitted while they happened "
                  "averaged 6000 prompt tok, 4.2x the run's mean of 1417"))
      << f->evidence;
  EXPECT_TRUE(Has(f->evidence, "KV usage max 97%")) << f->evidence;
  EXPECT_TRUE(Has(f->causes, "KV residency")) << f->causes;
}

TEST(Diagnosis, LongPromptsEvictStaysQuietWithoutPreemptionsOrWithEqualPrompts) {
  const std::vector<CounterSample> none = {{1'000'000'000, 2}, {2'000'000'000, 2}};
  const std::vector<CounterSample> some = {{1'000'000'000, 0}, {2'000'000'000, 3}};
  std::vector<RequestStart> equal;
  for (int i = 0; i < 10; ++i) equal.push_back({i * 200'000'000, 1024});
  EXPECT_FALSE(LongPromptsEvict("r", none, equal, 0.5).has_value());
  EXPECT_FALSE(LongPromptsEvict("r", some, equal, 0.99).has_value());
}

}  // namespace
}  // namespace servesweep::report
