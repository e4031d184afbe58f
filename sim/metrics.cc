#include "sim/metrics.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "common/clock.h"

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
// prometheus_client, which vLLM and SGLang use, does).
void AppendFamily(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void AppendSample(std::string& out, std::string_view name, std::string_view labels, T value) {
  fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, value);
}

// A bucket bound as prometheus_client writes it (Go's float format: 1.0, 0.1, 400.0).
std::string GoFloat(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

int64_t Load(const std::atomic<int64_t>& v) { return v.load(std::memory_order_relaxed); }

}  // namespace

Status ParsePersona(std::string_view name, Persona* out) {
  if (name == "vllm") {
    *out = Persona::kVllm;
  } else if (name == "sglang") {
    *out = Persona::kSglang;
  } else {
    return Status::InvalidArgument(
        fmt::format("sim: unknown persona '{}' (expected \"vllm\" or \"sglang\")", name));
  }
  return Status::Ok();
}

template <size_t N>
void Metrics::Histogram<N>::Observe(int64_t value_ns, int64_t times) {
  const double value_s = static_cast<double>(value_ns) / 1e9;
  size_t bucket = 0;
  while (bucket < N && value_s > (*bounds_s)[bucket]) ++bucket;
  buckets[bucket].fetch_add(times, std::memory_order_relaxed);
  sum_ns.fetch_add(value_ns, std::memory_order_relaxed);
}

template <size_t N>
void Metrics::Histogram<N>::Render(std::string& out, std::string_view name,
                                   std::string_view labels) const {
  auto it = std::back_inserter(out);
  int64_t cumulative = 0;
  for (size_t i = 0; i <= N; ++i) {
    cumulative += Load(buckets[i]);
    const std::string le = i < N ? GoFloat((*bounds_s)[i]) : "+Inf";
    fmt::format_to(it, "{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  fmt::format_to(it, "{}_sum{{{}}} {}\n", name, labels, static_cast<double>(Load(sum_ns)) / 1e9);
  fmt::format_to(it, "{}_count{{{}}} {}\n", name, labels, cumulative);
}

void Metrics::OnRequestStart(int64_t prompt_tok) {
  prompt_tok_total_.fetch_add(prompt_tok, std::memory_order_relaxed);
}

void Metrics::OnTokens(int64_t count) {
  generation_tok_total_.fetch_add(count, std::memory_order_relaxed);
}

void Metrics::OnFirstToken(int64_t ttft_ns) {
  vllm_ttft_.Observe(ttft_ns);
  sglang_ttft_.Observe(ttft_ns);
}

void Metrics::OnChunkInterval(int64_t interval_ns, int64_t tokens) {
  if (tokens < 1) return;
  // SGLang: the interval's sum once, the bucket of interval / tokens `tokens` times.
  const double per_token_s = static_cast<double>(interval_ns) / static_cast<double>(tokens) / 1e9;
  size_t bucket = 0;
  while (bucket < kSglangItlBoundsS.size() && per_token_s > kSglangItlBoundsS[bucket]) ++bucket;
  sglang_itl_.buckets[bucket].fetch_add(tokens, std::memory_order_relaxed);
  sglang_itl_.sum_ns.fetch_add(interval_ns, std::memory_order_relaxed);
}

void Metrics::OnRequestEnd(bool ok, int64_t e2e_ns) {
  (ok ? length_finished_total_ : aborted_total_).fetch_add(1, std::memory_order_relaxed);
  if (ok) sglang_e2e_.Observe(e2e_ns);
}

std::string Metrics::RenderPrometheus(Persona persona, const std::string& model_name,
                                      const EngineSnapshot& engine, int64_t process_start_s) const {
  std::string out;
  if (persona == Persona::kSglang) {
    RenderSglang(out, model_name, engine);  // SGLang serves no process collector (multiprocess)
  } else {
    RenderVllm(out, model_name, engine);
    AppendFamily(out, "process_start_time_seconds", "gauge",
                 "Start time of the process since unix epoch in seconds.");
    fmt::format_to(std::back_inserter(out), "process_start_time_seconds {}\n", process_start_s);
  }
  return out;
}

void Metrics::RenderVllm(std::string& out, const std::string& model_name,
                         const EngineSnapshot& engine) const {
  const std::string label = fmt::format("model_name=\"{}\"", EscapeLabel(model_name));
  auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    AppendFamily(out, name, type, help);
  };
  family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  AppendSample(out, "vllm:num_requests_running", label, engine.running);
  family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  AppendSample(out, "vllm:num_requests_waiting", label, engine.waiting);
  family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  AppendSample(out, "vllm:kv_cache_usage_perc", label,
               static_cast<double>(engine.kv_used_tok) /
                   static_cast<double>(std::max<int64_t>(engine.kv_capacity_tok, 1)));
  family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  AppendSample(out, "vllm:prompt_tokens_total", label, Load(prompt_tok_total_));
  family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  AppendSample(out, "vllm:generation_tokens_total", label, Load(generation_tok_total_));
  family("vllm:request_success_total", "counter", "Count of successfully processed requests.");
  AppendSample(out, "vllm:request_success_total", label + ",finished_reason=\"stop\"", 0);
  AppendSample(out, "vllm:request_success_total", label + ",finished_reason=\"length\"",
               Load(length_finished_total_));
  AppendSample(out, "vllm:request_success_total", label + ",finished_reason=\"abort\"",
               Load(aborted_total_));
  family("vllm:num_preemptions_total", "counter",
         "Cumulative number of preemption from the engine.");
  AppendSample(out, "vllm:num_preemptions_total", label, engine.preemptions_total);
  family("vllm:prefix_cache_queries_total", "counter",
         "Prefix cache queries, in terms of number of queried tokens.");
  AppendSample(out, "vllm:prefix_cache_queries_total", label, engine.prefix_cache_queries_tok);
  family("vllm:prefix_cache_hits_total", "counter",
         "Prefix cache hits, in terms of number of cached tokens.");
  AppendSample(out, "vllm:prefix_cache_hits_total", label, engine.prefix_cache_hits_tok);
  family("vllm:time_to_first_token_seconds", "histogram",
         "Histogram of time to first token in seconds.");
  vllm_ttft_.Render(out, "vllm:time_to_first_token_seconds", label);
}

// Names, types, help texts and label sets from SGLang's python/sglang/srt/metrics/collector.py
// (sgl-project/sglang@93d04878cfb9b08645fae7b11bd340ee33b34acf) and the scheduler's labels in
// python/sglang/srt/managers/scheduler_metrics_mixin.py
// (@01bb3c807f7e62c19a31de7548837505488c2b64): scheduler gauges carry model_name, engine_type,
// tp_rank, pp_rank; tokenizer counters and histograms carry model_name.
void Metrics::RenderSglang(std::string& out, const std::string& model_name,
                           const EngineSnapshot& engine) const {
  const std::string name = EscapeLabel(model_name);
  const std::string sched =
      fmt::format("model_name=\"{}\",engine_type=\"unified\",tp_rank=\"0\",pp_rank=\"0\"", name);
  const std::string tok = fmt::format("model_name=\"{}\"", name);

  const int64_t gen_total = Load(generation_tok_total_);
  double gen_throughput = 0;
  int64_t retracted = 0;
  {
    std::lock_guard lock(scrape_mu_);
    const int64_t now_ns = SteadyNowNs();
    if (last_scrape_ns_ != 0 && now_ns > last_scrape_ns_) {
      gen_throughput = static_cast<double>(gen_total - last_scrape_gen_tok_) * 1e9 /
                       static_cast<double>(now_ns - last_scrape_ns_);
    }
    retracted = engine.preemptions_total - last_scrape_preemptions_;
    last_scrape_ns_ = now_ns;
    last_scrape_gen_tok_ = gen_total;
    last_scrape_preemptions_ = engine.preemptions_total;
  }
  const double capacity = static_cast<double>(std::max<int64_t>(engine.kv_capacity_tok, 1));
  const double hit_rate = engine.prefix_cache_queries_tok > 0
                              ? static_cast<double>(engine.prefix_cache_hits_tok) /
                                    static_cast<double>(engine.prefix_cache_queries_tok)
                              : 0.0;

  auto gauge = [&](std::string_view metric, std::string_view help, auto value) {
    AppendFamily(out, metric, "gauge", help);
    AppendSample(out, metric, sched, value);
  };
  gauge("sglang:num_running_reqs", "The number of running requests.", engine.running);
  gauge("sglang:num_used_tokens", "The number of used tokens.", engine.kv_used_tok);
  gauge("sglang:token_usage", "The token usage.",
        static_cast<double>(engine.kv_used_tok) / capacity);
  gauge("sglang:gen_throughput", "The generation throughput (token/s).", gen_throughput);
  gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", engine.waiting);
  gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", hit_rate);
  gauge("sglang:num_retracted_reqs", "The number of retracted requests.", retracted);

  auto counter = [&](std::string_view metric, std::string_view help, int64_t value) {
    AppendFamily(out, metric, "counter", help);
    AppendSample(out, metric, tok, value);
  };
  counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.",
          Load(prompt_tok_total_));
  counter("sglang:generation_tokens_total", "Number of generation tokens processed.", gen_total);
  counter("sglang:cached_tokens_total", "Number of cached prompt tokens.",
          engine.prefix_cache_hits_tok);
  counter("sglang:num_requests_total", "Number of requests processed.",
          Load(length_finished_total_) + Load(aborted_total_));
  counter("sglang:num_aborted_requests_total", "Number of requests aborted.", Load(aborted_total_));

  AppendFamily(out, "sglang:time_to_first_token_seconds", "histogram",
               "Histogram of time to first token in seconds.");
  sglang_ttft_.Render(out, "sglang:time_to_first_token_seconds", tok);
  AppendFamily(out, "sglang:inter_token_latency_seconds", "histogram",
               "Histogram of inter-token latency in seconds.");
  sglang_itl_.Render(out, "sglang:inter_token_latency_seconds", tok);
  AppendFamily(out, "sglang:e2e_request_latency_seconds", "histogram",
               "Histogram of End-to-end request latency in seconds");
  sglang_e2e_.Render(out, "sglang:e2e_request_latency_seconds", tok);
}

}  // namespace servesweep::sim
