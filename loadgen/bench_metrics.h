// Summary metrics over a load run, computed exactly as `vllm bench serve` does
// (vllm/benchmarks/serve.py calculate_metrics), plus servesweep's own per-request rates.
// Definitions: docs/metrics.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "loadgen/load_generator.h"

namespace servesweep::loadgen {

struct Stats {
  // NaN everywhere when count == 0.
  double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0, min = 0, max = 0;
  uint64_t count = 0;
};

// Percentiles with linear interpolation between closest ranks (numpy.percentile's default).
Stats ComputeStats(std::vector<double> values);

struct SloLimits {
  double ttft_ms = 0, tpot_ms = 0, e2el_ms = 0;  // 0 = no limit
  bool any() const { return ttft_ms > 0 || tpot_ms > 0 || e2el_ms > 0; }
};

// Requests that meet every set limit, as vLLM counts them: `slo_ms / 1000 >= value_s`
// (inclusive). Per request, in seconds, same order; tpot_s is 0 for a one-token request.
uint32_t CountGood(const SloLimits& slo, const std::vector<double>& ttft_s,
                   const std::vector<double>& tpot_s, const std::vector<double>& e2el_s);

// One LoRA adapter's measured requests (docs/metrics.md#per-adapter): the same definitions as
// the run's figures, over the requests that named it.
struct AdapterSummary {
  std::string adapter;  // "" = the base model
  uint32_t requests = 0, completed = 0;
  double output_throughput = 0;  // its output tokens / the run's duration
  Stats ttft_ms, tpot_ms;
};

struct BenchSummary {
  double duration_s = 0;
  uint32_t completed = 0;
  uint32_t failed = 0;     // every unsuccessful measured request, cancelled ones included
  uint32_t cancelled = 0;  // of those, cut off by the drain timeout
  // Where the completed requests' output tokens came from, e.g. "server usage", "chunk
  // count", or "server usage for 9 of 10 requests, chunk count for the rest".
  std::string output_tokens_source;
  uint64_t total_input_tokens = 0;
  uint64_t total_output_tokens = 0;
  double request_throughput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  double goodput = 0;  // NaN when no SLO limit is set
  Stats ttft_ms, tpot_ms, itl_ms, e2el_ms;
  Stats decode_tok_per_s;   // per request: (output_tokens - 1) / (e2el - ttft)
  Stats prefill_tok_per_s;  // per request: prompt_tokens / ttft
  // Shared-prefix workloads: TTFT of the requests whose first prefix block an earlier request
  // had sent (a possible prefix-cache hit) and of those that were first (a miss); empty (NaN)
  // without planned prefixes.
  Stats ttft_prefix_seen_ms, ttft_prefix_new_ms;
  // Prefix-cache hit and miss as the server reported them per request
  // (RequestRecord::cached_prompt_tokens > 0: a hit, 0: a miss; unreported ones in neither).
  Stats ttft_hit_ms, ttft_miss_ms, prefill_tok_per_s_hit, prefill_tok_per_s_miss;
  // Multi-LoRA: per adapter in LoadResult::adapter_names order, then the base model when any
  // measured request named it; empty without adapters.
  std::vector<AdapterSummary> adapters;
  // Client-side queue time (start - scheduled) of every measured request that was sent: open
  // loop with a concurrency cap, the wait for a free slot (vLLM's client_queue_time).
  Stats client_queue_ms;
  // Client send delay (sent - start) of every measured request that went out: connection setup
  // for a new connection and the wait inside libcurl behind requests started together.
  Stats client_send_ms;
  // Time to first byte: first byte of the response body - start, successful requests.
  Stats ttfb_ms;
  // The steady-state window (LoadResult::window_*): its length, and the output tokens of every
  // chunk (any request, warm-up included, success or not) that arrived inside it, plus the
  // prompt tokens of the requests whose first output chunk arrived inside it, per second of
  // the window. NaN when the window is empty.
  double window_s = 0;
  double window_output_throughput = 0;
  double window_total_token_throughput = 0;
  // Why the measured requests failed: each distinct error text with its count, most frequent
  // first (FailureReasons below).
  std::vector<std::pair<std::string, uint32_t>> failure_reasons;
  // Measured requests whose reused connection the server had closed before the request reached
  // it: sent again once on a new connection (RequestRecord::reconnected), never counted failed.
  uint32_t reconnects = 0;
  // The client's own saturation over the measured phase (client_load.h): NaN when unmeasured.
  double load_thread_busy_max = 0;  // CPU time / wall time of the busiest load thread
  double read_lag_p99_ms = 0;       // kernel receive stamp -> the read by the load thread
  double send_lateness_p99_ms = 0;  // due (scheduled, slot free) -> handed to libcurl
  // An early stop (LoadResult::stopped): kNone when the phase ran its full length.
  StopReason stopped = StopReason::kNone;
  std::string stop_evidence;
  double stopped_at_s = 0;
};

BenchSummary Summarize(const LoadResult& result, const SloLimits& slo = {});

// The measured failures by error text, most frequent first (ties by text), as
// BenchSummary::failure_reasons.
std::vector<std::pair<std::string, uint32_t>> FailureReasons(
    const std::vector<RequestRecord>& requests);

// The first `top` reasons as one line: "8 x HTTP 404: The model 'sim' does not exist; 1 x ...",
// and how many other reasons there were; "" when nothing failed.
std::string DescribeFailureReasons(const std::vector<std::pair<std::string, uint32_t>>& reasons,
                                   size_t top = 3);

// What the client-bound verdict (client_load.h) reads of a summary run by `threads` threads.
ClientLoadFigures ClientLoadFiguresOf(const BenchSummary& summary, uint32_t threads);

// BenchSummary::output_tokens_source from how many of the completed requests had usage.
std::string DescribeOutputTokensSource(uint32_t from_usage, uint32_t completed);

// The JSON `vllm bench serve --save-result` writes, same field names (ms units as there).
nlohmann::json ToVllmJson(const BenchSummary& summary);

}  // namespace servesweep::loadgen
