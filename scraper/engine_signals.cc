#include "scraper/engine_signals.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace servesweep::scraper {

const std::vector<SignalName>& SignalNames() {
  // vLLM: v1 names. Every row is checked against the names the installed vLLM and SGLang
  // define (signal_names_check.h; tests/data/engine-facts and CI's installed engines).
  static const std::vector<SignalName> table = {
      {"vllm", "vllm:kv_cache_usage_perc", "kv_cache_usage", SignalKind::kGauge, 1.0},
      {"vllm", "vllm:num_requests_running", "running", SignalKind::kGauge, 1.0},
      {"vllm", "vllm:num_requests_waiting", "waiting", SignalKind::kGauge, 1.0},
      {"vllm", "vllm:num_preemptions_total", "preemptions", SignalKind::kCounter, 1.0},
      {"vllm", "vllm:prefix_cache_hits_total", "prefix_cache_hits", SignalKind::kCounter, 1.0},
      {"vllm", "vllm:prefix_cache_queries_total", "prefix_cache_queries", SignalKind::kCounter,
       1.0},
      {"vllm", "vllm:generation_tokens_total", "generation_tokens", SignalKind::kCounter, 1.0},
      {"vllm", "vllm:prompt_tokens_total", "prompt_tokens", SignalKind::kCounter, 1.0},
      // Every finished request, under its finished_reason (stop, length, abort, error): the
      // validity gate's request count (vllm/v1/metrics/loggers.py).
      {"vllm", "vllm:request_success_total", "requests_finished", SignalKind::kCounter, 1.0},
      // prometheus_client's process collector, exposed with one API server: a restart moves it.
      {"vllm", "process_start_time_seconds", "process_start_time", SignalKind::kGauge, 1.0},
      // SGLang 0.5 (sglang/srt/observability/metrics_collector.py); token_usage is a fraction.
      {"sglang", "sglang:token_usage", "kv_cache_usage", SignalKind::kGauge, 1.0},
      {"sglang", "sglang:num_running_reqs", "running", SignalKind::kGauge, 1.0},
      {"sglang", "sglang:num_queue_reqs", "waiting", SignalKind::kGauge, 1.0},
      {"sglang", "sglang:cached_tokens_total", "prefix_cache_hits", SignalKind::kCounter, 1.0},
      {"sglang", "sglang:prompt_tokens_total", "prefix_cache_queries", SignalKind::kCounter, 1.0},
      {"sglang", "sglang:prompt_tokens_total", "prompt_tokens", SignalKind::kCounter, 1.0},
      {"sglang", "sglang:generation_tokens_total", "generation_tokens", SignalKind::kCounter, 1.0},
      // Incremented once per finished request, aborted ones included (tokenizer manager).
      {"sglang", "sglang:num_requests_total", "requests_finished", SignalKind::kCounter, 1.0},
      {"sglang", "sglang:spec_accept_rate", "spec_decode_acceptance", SignalKind::kGauge, 1.0},
      // llama.cpp's llama-server --metrics (tools/server/server-task.cpp). Its
      // prompt_tokens_total excludes the tokens reused from the cache (prompt_tokens_cached_total),
      // so both add up to the prompt tokens, and the cached ones are the prefix-cache hits.
      {"llamacpp", "llamacpp:requests_processing", "running", SignalKind::kGauge, 1.0},
      {"llamacpp", "llamacpp:requests_deferred", "waiting", SignalKind::kGauge, 1.0},
      {"llamacpp", "llamacpp:tokens_predicted_total", "generation_tokens", SignalKind::kCounter,
       1.0},
      {"llamacpp", "llamacpp:prompt_tokens_total", "prompt_tokens", SignalKind::kCounter, 1.0},
      {"llamacpp", "llamacpp:prompt_tokens_cached_total", "prompt_tokens", SignalKind::kCounter,
       1.0},
      {"llamacpp", "llamacpp:prompt_tokens_cached_total", "prefix_cache_hits", SignalKind::kCounter,
       1.0},
      {"llamacpp", "llamacpp:prompt_tokens_total", "prefix_cache_queries", SignalKind::kCounter,
       1.0},
      {"llamacpp", "llamacpp:prompt_tokens_cached_total", "prefix_cache_queries",
       SignalKind::kCounter, 1.0},
  };
  return table;
}

SignalKind KindOf(const std::string& signal) {
  for (const auto& name : SignalNames()) {
    if (name.signal == signal) return name.kind;
  }
  return SignalKind::kGauge;
}

std::vector<SignalValue> ExtractSignals(const std::string& engine,
                                        const std::vector<PromSample>& samples) {
  std::map<std::string, double> sums;
  for (const auto& sample : samples) {
    for (const auto& name : SignalNames()) {
      if (name.engine == engine && name.metric == sample.name) {
        sums[name.signal] += sample.value * name.scale;
      }
    }
  }
  std::vector<SignalValue> out;
  for (const auto& [signal, value] : sums) out.push_back({signal, value});
  return out;
}

double ReduceSignal(const std::string& signal, const std::vector<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (KindOf(signal) == SignalKind::kCounter) return values.back() - values.front();
  return *std::max_element(values.begin(), values.end());
}

}  // namespace servesweep::scraper
