#include "sim/metrics.h"

#include <fmt/format.h>

#include <iterator>

namespace servesweep::sim {
namespace {

// Prometheus label values escape backslash, double quote and newline.
std::string EscapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Prometheus names a counter's family with its _total suffix in the text format (as
// prometheus_client, which vLLM uses, does).
void AppendFamily(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

void Metrics::OnRequestStart(int64_t prompt_tok) {
  running_.fetch_add(1, std::memory_order_relaxed);
  kv_held_tok_.fetch_add(prompt_tok, std::memory_order_relaxed);
  prompt_tok_total_.fetch_add(prompt_tok, std::memory_order_relaxed);
}

void Metrics::OnToken() {
  generation_tok_total_.fetch_add(1, std::memory_order_relaxed);
  kv_held_tok_.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::OnFirstToken(int64_t ttft_ns) {
  const double ttft_s = static_cast<double>(ttft_ns) / 1e9;
  size_t bucket = 0;
  while (bucket < kTtftBoundsS.size() && ttft_s > kTtftBoundsS[bucket]) ++bucket;
  ttft_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  ttft_sum_ns_.fetch_add(ttft_ns, std::memory_order_relaxed);
}

void Metrics::OnRequestEnd(int64_t held_tok, bool ok) {
  running_.fetch_sub(1, std::memory_order_relaxed);
  kv_held_tok_.fetch_sub(held_tok, std::memory_order_relaxed);
  (ok ? length_finished_total_ : aborted_total_).fetch_add(1, std::memory_order_relaxed);
}

std::string Metrics::RenderPrometheus(const std::string& model_name,
                                      int64_t kv_capacity_tok) const {
  const std::string label = fmt::format("model_name=\"{}\"", EscapeLabel(model_name));
  std::string out;
  auto it = std::back_inserter(out);
  auto sample = [&](std::string_view name, std::string_view extra_label, auto value) {
    fmt::format_to(it, "{}{{{}{}}} {}\n", name, label, extra_label, value);
  };
  auto load = [](const std::atomic<int64_t>& v) { return v.load(std::memory_order_relaxed); };

  AppendFamily(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  sample("vllm:num_requests_running", "", load(running_));
  AppendFamily(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  sample("vllm:num_requests_waiting", "", 0);
  AppendFamily(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  sample("vllm:kv_cache_usage_perc", "",
         static_cast<double>(load(kv_held_tok_)) / static_cast<double>(kv_capacity_tok));
  AppendFamily(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  sample("vllm:prompt_tokens_total", "", load(prompt_tok_total_));
  AppendFamily(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  sample("vllm:generation_tokens_total", "", load(generation_tok_total_));
  AppendFamily(out, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
  sample("vllm:request_success_total", ",finished_reason=\"stop\"", 0);
  sample("vllm:request_success_total", ",finished_reason=\"length\"", load(length_finished_total_));
  sample("vllm:request_success_total", ",finished_reason=\"abort\"", load(aborted_total_));
  AppendFamily(out, "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.");
  sample("vllm:num_preemptions_total", "", 0);
  // The emulator has no prefix cache: every prompt token is a query and a miss.
  AppendFamily(out, "vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.");
  sample("vllm:prefix_cache_queries_total", "", load(prompt_tok_total_));
  AppendFamily(out, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.");
  sample("vllm:prefix_cache_hits_total", "", 0);

  AppendFamily(out, "vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.");
  int64_t cumulative = 0;
  for (size_t i = 0; i < ttft_buckets_.size(); ++i) {
    cumulative += load(ttft_buckets_[i]);
    const std::string le = i < kTtftBoundsS.size() ? fmt::format("{}", kTtftBoundsS[i]) : "+Inf";
    fmt::format_to(it, "vllm:time_to_first_token_seconds_bucket{{{},le=\"{}\"}} {}\n", label, le,
                   cumulative);
  }
  sample("vllm:time_to_first_token_seconds_sum", "", static_cast<double>(load(ttft_sum_ns_)) / 1e9);
  sample("vllm:time_to_first_token_seconds_count", "", cumulative);
  return out;
}

}  // namespace servesweep::sim
