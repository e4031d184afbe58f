// Matches `vllm bench serve` as read in vllm-project/vllm:
//   vllm/benchmarks/serve.py  @ 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1
//     calculate_metrics(), benchmark() result dict, process_one_metric(), --metric-percentiles
//   vllm/benchmarks/lib/endpoint_request_func.py @ 02cfb534df5674737558730b10f23d1b7aef9b7c
//     async_request_openai_completions / _chat_completions (ttft, itl, latency)
// Deliberate differences (README.md): what counts as an output chunk (text only, not any
// non-empty `choices`), output_tokens without usage = output chunks (vLLM retokenizes the
// text), and duration = t0 -> last measured completion (vLLM: before the first send -> after
// gather; the same up to scheduling noise).
#include "loadgen/bench_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "common/percentile.h"
#include "common/sort_doubles.h"

namespace servesweep::loadgen {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Stats Scaled(Stats s, double k) {
  for (double* v : {&s.mean, &s.median, &s.std, &s.p90, &s.p95, &s.p99, &s.min, &s.max}) *v *= k;
  return s;
}

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

Stats ComputeStats(std::vector<double> values) {
  Stats s;
  s.count = values.size();
  if (values.empty()) {
    s.mean = s.median = s.std = s.p90 = s.p95 = s.p99 = s.min = s.max = kNaN;
    return s;
  }
  SortDoubles(&values);
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  double sq = 0;
  for (double v : values) sq += (v - s.mean) * (v - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(values.size()));  // population, like np.std
  s.median = PercentileOfSorted(values, 50);
  s.p90 = PercentileOfSorted(values, 90);
  s.p95 = PercentileOfSorted(values, 95);
  s.p99 = PercentileOfSorted(values, 99);
  s.min = values.front();
  s.max = values.back();
  return s;
}

std::string DescribeOutputTokensSource(uint32_t from_usage, uint32_t completed) {
  if (completed == 0) return "n/a: no completed request";
  if (from_usage == completed) return "server usage";
  if (from_usage == 0) return "chunk count";
  return fmt::format("server usage for {} of {} requests, chunk count for the rest", from_usage,
                     completed);
}

uint32_t CountGood(const SloLimits& slo, const std::vector<double>& ttft_s,
                   const std::vector<double>& tpot_s, const std::vector<double>& e2el_s) {
  uint32_t good = 0;
  for (size_t i = 0; i < ttft_s.size(); ++i) {
    bool ok = true;
    if (slo.ttft_ms > 0) ok = ok && slo.ttft_ms / 1000 >= ttft_s[i];
    if (slo.tpot_ms > 0) ok = ok && slo.tpot_ms / 1000 >= tpot_s[i];
    if (slo.e2el_ms > 0) ok = ok && slo.e2el_ms / 1000 >= e2el_s[i];
    if (ok) ++good;
  }
  return good;
}

std::vector<std::pair<std::string, uint32_t>> FailureReasons(
    const std::vector<RequestRecord>& requests) {
  std::map<std::string, uint32_t> counts;
  for (const RequestRecord& r : requests) {
    if (!r.warmup && !r.success) ++counts[r.error.empty() ? "no error recorded" : r.error];
  }
  std::vector<std::pair<std::string, uint32_t>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string DescribeFailureReasons(const std::vector<std::pair<std::string, uint32_t>>& reasons,
                                   size_t top) {
  std::string out;
  for (size_t i = 0; i < reasons.size() && i < top; ++i) {
    out += fmt::format("{}{} x {}", i ? "; " : "", reasons[i].second, reasons[i].first);
  }
  if (reasons.size() > top) out += fmt::format("; and {} other reason(s)", reasons.size() - top);
  return out;
}

BenchSummary Summarize(const LoadResult& result, const SloLimits& slo) {
  BenchSummary out;
  out.duration_s = result.duration_s;
  // Per-request values in seconds, as vLLM keeps them; scaled to ms at the end like its
  // np.mean(ttfts) * 1000.
  std::vector<double> ttfts, tpots, all_tpots, itls, e2els, decode, prefill, ttft_seen, ttft_new;
  std::vector<double> queue_s, send_s, ttfb_s;
  std::vector<double> ttft_hit, ttft_miss, prefill_hit, prefill_miss;
  // Per adapter (index + 1; 0 = the base model): requests, completed, output tokens, TTFT, TPOT.
  struct PerAdapter {
    uint32_t requests = 0, completed = 0;
    uint64_t output_tok = 0;
    std::vector<double> ttft_s, tpot_s;
  };
  std::vector<PerAdapter> per_adapter(result.adapter_names.size() + 1);
  auto adapter_of = [&per_adapter](const RequestRecord& r) -> PerAdapter& {
    const size_t k = r.adapter >= 0 ? static_cast<size_t>(r.adapter) + 1 : 0;
    return per_adapter[std::min(k, per_adapter.size() - 1)];
  };
  uint64_t window_output_tok = 0, window_prompt_tok = 0;
  uint32_t from_usage = 0;
  const int64_t win_lo = result.window_start_ns, win_hi = result.window_end_ns;
  for (const RequestRecord& r : result.requests) {
    // Window throughput: every chunk inside [start, end), whoever sent the request.
    for (size_t i = 0; i < r.chunk_times_ns.size(); ++i) {
      if (r.chunk_times_ns[i] >= win_lo && r.chunk_times_ns[i] < win_hi) {
        window_output_tok += i < r.chunk_tokens.size() ? r.chunk_tokens[i] : 1;
      }
    }
    if (r.first_token_ns >= win_lo && r.first_token_ns < win_hi) {
      window_prompt_tok += r.prompt_tokens;
    }
    if (r.warmup) continue;
    if (r.start_ns >= 0 && r.scheduled_ns >= 0)
      queue_s.push_back(Seconds(r.start_ns - r.scheduled_ns));
    if (r.sent_ns >= 0 && r.start_ns >= 0) send_s.push_back(Seconds(r.sent_ns - r.start_ns));
    // Latencies run from the request's send: records without one (hand-made, or from before
    // sent_ns) from its start.
    const int64_t sent_ns = r.sent_ns >= 0 ? r.sent_ns : r.start_ns;
    if (r.cancelled) ++out.cancelled;
    if (r.reconnected) ++out.reconnects;
    ++adapter_of(r).requests;
    if (!r.success) {
      ++out.failed;
      continue;
    }
    if (r.first_byte_ns >= 0) ttfb_s.push_back(Seconds(r.first_byte_ns - sent_ns));
    ++out.completed;
    if (r.output_tokens_from_usage) ++from_usage;
    // vLLM: usage.completion_tokens, else retokenized text, else 1. Ours is never 0 on success
    // (at least one output chunk); the max() keeps vLLM's floor for hand-made records.
    const uint32_t output_len = std::max<uint32_t>(r.output_tokens, 1);
    out.total_input_tokens += r.prompt_tokens;
    out.total_output_tokens += output_len;
    const double ttft_s = Seconds(r.first_token_ns - sent_ns);
    const double latency_s = Seconds(r.end_ns - sent_ns);  // sent -> last output chunk
    double tpot_s = 0;
    if (output_len > 1) {
      tpot_s = (latency_s - ttft_s) / static_cast<double>(output_len - 1);
      tpots.push_back(tpot_s);
    }
    all_tpots.push_back(tpot_s);  // vLLM's goodput uses this list: tpot 0 when output_len <= 1
    for (size_t i = 1; i < r.chunk_times_ns.size(); ++i) {
      itls.push_back(Seconds(r.chunk_times_ns[i] - r.chunk_times_ns[i - 1]));  // per chunk
    }
    ttfts.push_back(ttft_s);
    if (r.prefix_seen >= 0) (r.prefix_seen ? ttft_seen : ttft_new).push_back(ttft_s);
    e2els.push_back(latency_s);
    // servesweep's own per-request rates (not in vLLM).
    if (output_len > 1 && r.end_ns > r.first_token_ns) {
      decode.push_back(static_cast<double>(output_len - 1) / Seconds(r.end_ns - r.first_token_ns));
    }
    if (ttft_s > 0) prefill.push_back(static_cast<double>(r.prompt_tokens) / ttft_s);
    if (r.cached_prompt_tokens >= 0) {
      const bool hit = r.cached_prompt_tokens > 0;
      (hit ? ttft_hit : ttft_miss).push_back(ttft_s);
      if (ttft_s > 0) {
        (hit ? prefill_hit : prefill_miss).push_back(static_cast<double>(r.prompt_tokens) / ttft_s);
      }
    }
    PerAdapter& a = adapter_of(r);
    ++a.completed;
    a.output_tok += output_len;
    a.ttft_s.push_back(ttft_s);
    if (output_len > 1) a.tpot_s.push_back(tpot_s);
  }

  out.output_tokens_source = DescribeOutputTokensSource(from_usage, out.completed);
  const double dur = result.duration_s;
  auto per_s = [dur](double x) { return dur > 0 ? x / dur : kNaN; };
  out.request_throughput = per_s(out.completed);
  out.output_throughput = per_s(static_cast<double>(out.total_output_tokens));
  out.total_token_throughput =
      per_s(static_cast<double>(out.total_input_tokens + out.total_output_tokens));

  out.goodput = slo.any() ? per_s(CountGood(slo, ttfts, all_tpots, e2els)) : kNaN;

  out.ttft_ms = Scaled(ComputeStats(std::move(ttfts)), 1000);
  out.tpot_ms = Scaled(ComputeStats(std::move(tpots)), 1000);
  out.itl_ms = Scaled(ComputeStats(std::move(itls)), 1000);
  out.e2el_ms = Scaled(ComputeStats(std::move(e2els)), 1000);
  out.decode_tok_per_s = ComputeStats(std::move(decode));
  out.prefill_tok_per_s = ComputeStats(std::move(prefill));
  out.ttft_prefix_seen_ms = Scaled(ComputeStats(std::move(ttft_seen)), 1000);
  out.ttft_prefix_new_ms = Scaled(ComputeStats(std::move(ttft_new)), 1000);
  out.ttft_hit_ms = Scaled(ComputeStats(std::move(ttft_hit)), 1000);
  out.ttft_miss_ms = Scaled(ComputeStats(std::move(ttft_miss)), 1000);
  out.prefill_tok_per_s_hit = ComputeStats(std::move(prefill_hit));
  out.prefill_tok_per_s_miss = ComputeStats(std::move(prefill_miss));
  for (size_t k = 1; k <= per_adapter.size() && !result.adapter_names.empty(); ++k) {
    const size_t i = k % per_adapter.size();  // the adapters in order, then the base model
    PerAdapter& a = per_adapter[i];
    if (i == 0 && a.requests == 0) continue;
    AdapterSummary summary;
    summary.adapter = i == 0 ? "" : result.adapter_names[i - 1];
    summary.requests = a.requests;
    summary.completed = a.completed;
    summary.output_throughput = per_s(static_cast<double>(a.output_tok));
    summary.ttft_ms = Scaled(ComputeStats(std::move(a.ttft_s)), 1000);
    summary.tpot_ms = Scaled(ComputeStats(std::move(a.tpot_s)), 1000);
    out.adapters.push_back(std::move(summary));
  }
  out.client_queue_ms = Scaled(ComputeStats(std::move(queue_s)), 1000);
  out.client_send_ms = Scaled(ComputeStats(std::move(send_s)), 1000);
  out.ttfb_ms = Scaled(ComputeStats(std::move(ttfb_s)), 1000);
  out.window_s = Seconds(win_hi - win_lo);
  out.window_output_throughput =
      out.window_s > 0 ? static_cast<double>(window_output_tok) / out.window_s : kNaN;
  out.window_total_token_throughput =
      out.window_s > 0 ? static_cast<double>(window_output_tok + window_prompt_tok) / out.window_s
                       : kNaN;
  out.failure_reasons = FailureReasons(result.requests);
  out.load_thread_busy_max = result.client.busiest_thread_cpu_fraction;
  out.read_lag_p99_ms = result.client.read_lag.PercentileMs(99);
  out.send_lateness_p99_ms = result.client.send_lateness.PercentileMs(99);
  out.stopped = result.stopped;
  out.stop_evidence = result.stop_evidence;
  out.stopped_at_s = result.stopped_at_s;
  return out;
}

nlohmann::json ToVllmJson(const BenchSummary& s) {
  nlohmann::json j;
  j["duration"] = s.duration_s;
  j["completed"] = s.completed;
  j["failed"] = s.failed;
  j["total_input_tokens"] = s.total_input_tokens;
  j["total_output_tokens"] = s.total_output_tokens;
  j["request_throughput"] = s.request_throughput;
  // vLLM writes None (null) when no --goodput was given.
  j["request_goodput"] =
      std::isnan(s.goodput) ? nlohmann::json(nullptr) : nlohmann::json(s.goodput);
  j["output_throughput"] = s.output_throughput;
  j["total_token_throughput"] = s.total_token_throughput;
  // vLLM computes np.mean(x or 0): an empty list reports 0, not NaN.
  auto v = [](double x) { return std::isnan(x) ? 0.0 : x; };
  // vLLM's defaults: --metric-percentiles 99; --percentile-metrics ttft,tpot,itl. e2el is
  // added here (vLLM emits it with --percentile-metrics ...,e2el, under these same keys).
  const std::pair<const char*, const Stats*> metrics[] = {
      {"ttft", &s.ttft_ms}, {"tpot", &s.tpot_ms}, {"itl", &s.itl_ms}, {"e2el", &s.e2el_ms}};
  for (const auto& [name, st] : metrics) {
    const std::string n(name);
    j["mean_" + n + "_ms"] = v(st->mean);
    j["median_" + n + "_ms"] = v(st->median);
    j["std_" + n + "_ms"] = v(st->std);
    j["p99_" + n + "_ms"] = v(st->p99);
  }
  return j;
}

ClientLoadFigures ClientLoadFiguresOf(const BenchSummary& s, uint32_t threads) {
  ClientLoadFigures f;
  f.busiest_thread_cpu_fraction = s.load_thread_busy_max;
  f.phase_s = s.duration_s;
  f.read_lag_p99_ms = s.read_lag_p99_ms;
  f.send_lateness_p99_ms = s.send_lateness_p99_ms;
  f.itl_median_ms = s.itl_ms.median;
  f.threads = threads;
  return f;
}

}  // namespace servesweep::loadgen
