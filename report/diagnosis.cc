#include "report/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace servesweep::report {
namespace {

double Median(std::vector<double> v) { return RangeOf(std::move(v)).median; }

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

bool Known(double v) { return std::isfinite(v); }

std::string Pct(double fraction) { return fmt::format("{:.0f}%", fraction * 100); }

}  // namespace

std::optional<Finding> TtftGrowsWithPromptLength(const std::string& subject,
                                                 const std::vector<PromptTtft>& requests,
                                                 const PrefillSignals& signals) {
  if (requests.size() < 8) return std::nullopt;
  std::vector<PromptTtft> sorted = requests;
  std::stable_sort(sorted.begin(), sorted.end(), [](const PromptTtft& a, const PromptTtft& b) {
    return a.prompt_tok < b.prompt_tok;
  });
  const size_t quarter = sorted.size() / 4;
  std::vector<double> short_len, short_ttft, long_len, long_ttft;
  for (size_t i = 0; i < quarter; ++i) {
    short_len.push_back(sorted[i].prompt_tok);
    short_ttft.push_back(sorted[i].ttft_ms);
    long_len.push_back(sorted[sorted.size() - 1 - i].prompt_tok);
    long_ttft.push_back(sorted[sorted.size() - 1 - i].ttft_ms);
  }
  const double len_short = Mean(short_len), len_long = Mean(long_len);
  const double ttft_short = Median(short_ttft), ttft_long = Median(long_ttft);
  if (!(len_short > 0) || len_long < kPromptSpreadMin * len_short || !(ttft_short > 0) ||
      ttft_long < kTtftGrowthMin * ttft_short) {
    return std::nullopt;
  }
  Finding f;
  f.rule = "TTFT grows with prompt length";
  f.subject = subject;
  f.evidence = fmt::format(
      "median TTFT {:.1f} ms for the longest quarter of prompts (mean {:.0f} tok) vs {:.1f} ms "
      "for the shortest (mean {:.0f} tok): {:.1f}x for {:.1f}x the tokens",
      ttft_long, len_long, ttft_short, len_short, ttft_long / ttft_short, len_long / len_short);
  if (ttft_long > ttft_short) {
    f.evidence += fmt::format("; marginal prefill rate {:.0f} tok/s",
                              (len_long - len_short) / ((ttft_long - ttft_short) / 1000));
  }
  f.evidence += Known(signals.prefix_cache_hit_rate)
                    ? fmt::format("; prefix-cache hit rate {}", Pct(signals.prefix_cache_hit_rate))
                    : "; prefix-cache hit rate not known";
  if (Known(signals.waiting_max)) {
    f.evidence += fmt::format("; waiting max {:.0f}", signals.waiting_max);
  }
  f.evidence += fmt::format("; warm-up {:.0f} request(s)", signals.warmup_requests);
  f.causes =
      "prefill rate (chunked prefill size, TP), queue time before prefill (waiting requests), "
      "prefix-cache hit rate (shared prefixes not reused), warm-up (cold caches and graphs)";
  return f;
}

std::optional<Finding> DecodeSlowAtConcurrencyOne(const std::string& subject, double tpot_c1_ms,
                                                  std::optional<double> roofline_tpot_ms) {
  if (!Known(tpot_c1_ms) || tpot_c1_ms <= 0) return std::nullopt;
  Finding f;
  f.rule = "Decode slow even at concurrency 1";
  f.subject = subject;
  if (roofline_tpot_ms && *roofline_tpot_ms > 0) {
    if (tpot_c1_ms <= kSlowDecodeVsRoofline * *roofline_tpot_ms) return std::nullopt;
    f.evidence = fmt::format(
        "median TPOT {:.2f} ms at concurrency 1 ({:.1f} tok/s per user) is {:.1f}x the "
        "performance model's roofline estimate of {:.2f} ms (threshold {:g}x)",
        tpot_c1_ms, 1000 / tpot_c1_ms, tpot_c1_ms / *roofline_tpot_ms, *roofline_tpot_ms,
        kSlowDecodeVsRoofline);
  } else {
    if (tpot_c1_ms <= kSlowDecodeTpotMs) return std::nullopt;
    f.evidence = fmt::format(
        "median TPOT {:.2f} ms at concurrency 1 ({:.1f} tok/s per user) is above {:g} ms (no "
        "roofline estimate for this model and GPU)",
        tpot_c1_ms, 1000 / tpot_c1_ms, kSlowDecodeTpotMs);
  }
  f.causes =
      "engine path (eager mode, no CUDA graphs), kernels (attention backend), precision "
      "(weights read per token), communication (TP all-reduce latency)";
  return f;
}

std::optional<Finding> ThroughputPlateaus(const std::string& subject, const Curve& curve,
                                          const Knee& knee) {
  if (!knee.found || knee.index + 1 >= curve.points.size()) return std::nullopt;
  const CurvePoint& top = curve.points.back();
  const double top_throughput = top.Median("output_throughput");
  Finding f;
  f.rule = "Aggregate throughput plateaus as concurrency grows";
  f.subject = subject;
  f.evidence =
      fmt::format("output throughput {:.1f} tok/s at {:g} (the knee) and {:.1f} tok/s at {:g}",
                  knee.throughput, knee.level, top_throughput, top.level);
  const double kv = top.Median("kv_cache_usage_max");
  const double preemptions = top.Median("preemptions");
  const double running = top.Median("running_max");
  const double waiting = top.Median("waiting_max");
  // A run cannot keep more requests in flight than it sends.
  const double sent = top.Median("completed") + top.Median("failed");
  const double offered = Known(sent) && sent > 0 ? std::min(top.level, sent) : top.level;
  if (Known(kv)) f.evidence += fmt::format("; KV usage max {} at {:g}", Pct(kv), top.level);
  if (Known(preemptions)) f.evidence += fmt::format("; preemptions {:.0f}", preemptions);
  if (Known(running)) f.evidence += fmt::format("; running max {:.0f}", running);
  if (Known(waiting)) f.evidence += fmt::format("; waiting max {:.0f}", waiting);
  if ((Known(kv) && kv >= kKvFull) || (Known(preemptions) && preemptions > 0)) {
    f.causes =
        "KV capacity: the cache is full (usage near 100% or preemptions); more GPU memory for "
        "KV (gpu_memory_fraction, fp8 KV cache, more TP) or shorter contexts";
  } else if (Known(running) && running < kBatchedShare * offered && Known(waiting) && waiting > 0) {
    f.causes = fmt::format(
        "scheduler batching: at most {:.0f} of {:g} requests ran at once while others waited "
        "(max_num_seqs, max_batched_tokens)",
        running, offered);
  } else {
    f.causes =
        "memory bandwidth or compute: the batch grew but each step got slower in proportion "
        "(weights and KV read per step)";
  }
  return f;
}

std::optional<Finding> P95RisesWhileOutputImproves(const std::string& subject, const Curve& curve) {
  for (size_t i = 0; i + 1 < curve.points.size(); ++i) {
    const CurvePoint& a = curve.points[i];
    const CurvePoint& b = curve.points[i + 1];
    const double t_a = a.Median("output_throughput"), t_b = b.Median("output_throughput");
    const double p_a = a.Median("e2el_p95_ms"), p_b = b.Median("e2el_p95_ms");
    if (!(t_a > 0) || !(p_a > 0) || !Known(t_b) || !Known(p_b)) continue;
    const double gain = t_b / t_a - 1;
    const double growth = p_b / p_a;
    if (gain < kThroughputGainMin || growth < kP95GrowthMin || growth - 1 < 2 * gain) continue;
    Finding f;
    f.rule = "p95 latency rises steeply while aggregate output improves";
    f.subject = subject;
    f.evidence = fmt::format(
        "from {:g} to {:g}: p95 E2E {:.0f} -> {:.0f} ms ({:.1f}x) while output throughput "
        "{:.0f} -> {:.0f} tok/s (+{})",
        a.level, b.level, p_a, p_b, growth, t_a, t_b, Pct(gain));
    const double waiting = b.Median("waiting_max");
    const double p50 = b.Median("e2el_median_ms");
    std::vector<std::string> causes;
    if (Known(waiting)) {
      f.evidence += fmt::format("; waiting max {:.0f}", waiting);
      if (waiting > 0) causes.push_back("queueing (requests waited for a batch slot)");
    }
    if (p50 > 0) {
      f.evidence += fmt::format("; p95/p50 E2E {:.1f}", p_b / p50);
      if (p_b / p50 >= kLengthMixP95OverP50) {
        causes.push_back("request-length mix (long requests in the tail)");
      }
    }
    causes.push_back("batch size (each step slower as the batch grows)");
    for (const auto& c : causes) f.causes += (f.causes.empty() ? "" : "; ") + c;
    return f;
  }
  return std::nullopt;
}

std::optional<Finding> LongPromptsEvict(const std::string& subject,
                                        const std::vector<CounterSample>& preemptions,
                                        const std::vector<RequestStart>& requests,
                                        double kv_usage_max) {
  if (preemptions.size() < 2 || requests.empty()) return std::nullopt;
  std::vector<double> all, evicting;
  for (const auto& r : requests) all.push_back(r.prompt_tok);
  double preempted = 0;
  for (size_t i = 1; i < preemptions.size(); ++i) {
    const double rise = preemptions[i].value - preemptions[i - 1].value;
    if (!(rise > 0)) continue;
    preempted += rise;
    for (const auto& r : requests) {
      if (r.start_ns > preemptions[i - 1].at_ns && r.start_ns <= preemptions[i].at_ns) {
        evicting.push_back(r.prompt_tok);
      }
    }
  }
  if (preempted <= 0 || evicting.empty()) return std::nullopt;
  const double mean_all = Mean(all), mean_evicting = Mean(evicting);
  if (!(mean_all > 0) || mean_evicting < kEvictingPromptRatio * mean_all) return std::nullopt;
  Finding f;
  f.rule = "Long prompts evict active requests";
  f.subject = subject;
  f.evidence = fmt::format(
      "{:.0f} preemption(s); the {} request(s) admitted while they happened averaged {:.0f} "
      "prompt tok, {:.1f}x the run's mean of {:.0f}",
      preempted, evicting.size(), mean_evicting, mean_evicting / mean_all, mean_all);
  if (Known(kv_usage_max)) f.evidence += fmt::format("; KV usage max {}", Pct(kv_usage_max));
  f.causes =
      "KV residency: a long prefill needs blocks that running requests hold; cache allocation "
      "(gpu_memory_fraction, KV dtype, max_batched_tokens / chunked prefill, max_num_seqs)";
  return f;
}

}  // namespace servesweep::report
