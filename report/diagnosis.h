// The report's diagnosis: rules applied to the measured signals, each a pure function that
// returns a finding (naming the figures that triggered it and the likely causes) or nothing.
// Thresholds are constants here and documented in docs/report.md#diagnosis.
//
// Thread-safety: plain functions and values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/report_curves.h"

namespace servesweep::report {

struct Finding {
  std::string rule;      // e.g. "TTFT grows with prompt length"
  std::string subject;   // the configuration or run it is about
  std::string evidence;  // the figures that triggered it
  std::string causes;    // where to look
};

// 1. TTFT grows with prompt length (within one run). Requests sorted by prompt length; the
// longest quarter's prompts average >= 2x the shortest quarter's, and its median TTFT is
// >= 1.5x the shortest quarter's. Needs >= 8 requests.
constexpr double kPromptSpreadMin = 2.0;
constexpr double kTtftGrowthMin = 1.5;
struct PromptTtft {
  double prompt_tok = 0;
  double ttft_ms = 0;
};
struct PrefillSignals {
  double prefix_cache_hit_rate = 0;  // hits / queries; NaN when not known
  double waiting_max = 0;            // NaN when not known
  double warmup_requests = 0;
};
std::optional<Finding> TtftGrowsWithPromptLength(const std::string& subject,
                                                 const std::vector<PromptTtft>& requests,
                                                 const PrefillSignals& signals);

// 2. Decode slow even at concurrency 1: the median TPOT at concurrency 1 is above 1.5x the
// performance model's roofline estimate for one request (when the model and GPU are known to
// perfmodel/), else above 50 ms (under 20 tokens/s per user).
constexpr double kSlowDecodeVsRoofline = 1.5;
constexpr double kSlowDecodeTpotMs = 50;
std::optional<Finding> DecodeSlowAtConcurrencyOne(const std::string& subject, double tpot_c1_ms,
                                                  std::optional<double> roofline_tpot_ms);

// 3. Aggregate throughput plateaus as concurrency grows: the curve has a knee below its highest
// level (report_curves.h). Causes from the highest level's signals: KV capacity when KV usage
// >= 90% or any preemption; scheduler batching when fewer than 90% of the offered concurrency
// (the level, or the requests sent if fewer) ran at once while requests waited; else the batch
// grew without throughput (memory bandwidth or compute bound).
constexpr double kKvFull = 0.90;
constexpr double kBatchedShare = 0.90;
std::optional<Finding> ThroughputPlateaus(const std::string& subject, const Curve& curve,
                                          const Knee& knee);

// 4. p95 latency rises steeply while output improves: between two consecutive levels, output
// throughput grows >= 5% while p95 E2E latency grows >= 1.5x and by at least twice the
// throughput's relative growth. Causes: queueing (requests waited), request-length mix (p95/p50
// E2E >= 2), else batch size.
constexpr double kThroughputGainMin = 0.05;
constexpr double kP95GrowthMin = 1.5;
constexpr double kLengthMixP95OverP50 = 2.0;
std::optional<Finding> P95RisesWhileOutputImproves(const std::string& subject, const Curve& curve);

// 5. Long prompts evict active requests (within one run): preemptions happened, and the
// requests that started in the scrape intervals where the preemption counter rose have prompts
// averaging >= 1.25x the run's mean prompt.
constexpr double kEvictingPromptRatio = 1.25;
struct CounterSample {
  int64_t at_ns = 0;
  double value = 0;  // cumulative counter
};
struct RequestStart {
  int64_t start_ns = 0;
  double prompt_tok = 0;
};
std::optional<Finding> LongPromptsEvict(const std::string& subject,
                                        const std::vector<CounterSample>& preemptions,
                                        const std::vector<RequestStart>& requests,
                                        double kv_usage_max);

}  // namespace servesweep::report
