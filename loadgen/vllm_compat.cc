#include "loadgen/vllm_compat.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

namespace servesweep::loadgen {
namespace {

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// np.mean(x or 0) and friends: an empty list is [0].
Stats VllmStats(std::vector<double> values_s) {
  const bool empty = values_s.empty();
  if (empty) values_s.push_back(0);
  Stats s = ComputeStats(std::move(values_s));
  if (empty) s.count = 0;
  for (double* v : {&s.mean, &s.median, &s.std, &s.p90, &s.p95, &s.p99, &s.min, &s.max}) {
    *v *= 1000;
  }
  return s;
}

}  // namespace

VllmChunk ClassifyVllmChunk(std::string_view payload, bool chat) {
  VllmChunk out;
  // vLLM strips the message and removes the "data: " prefix; our SSE parser already did.
  const size_t b = payload.find_first_not_of(" \t\r\n");
  const size_t e = payload.find_last_not_of(" \t\r\n");
  payload = b == std::string_view::npos ? std::string_view{} : payload.substr(b, e - b + 1);
  if (payload == "[DONE]") {
    out.done = true;
    return out;
  }
  const nlohmann::json data = nlohmann::json::parse(payload, nullptr, false);
  if (data.is_discarded() || !data.is_object()) {
    out.exception = true;  // json.loads raises, or data.get fails on a non-dict
    return out;
  }
  auto choices = data.find("choices");
  // Python truthiness: a non-empty list (or any non-empty value) counts.
  const bool truthy = choices != data.end() && !choices->is_null() &&
                      !(choices->is_array() && choices->empty()) &&
                      !(choices->is_object() && choices->empty()) &&
                      !(choices->is_boolean() && !choices->get<bool>());
  if (truthy) {
    if (!choices->is_array() || !(*choices)[0].is_object()) {
      out.exception = true;  // choices[0].get / ["delta"] on something else raises
      return out;
    }
    if (chat) {
      auto delta = (*choices)[0].find("delta");
      if (delta == (*choices)[0].end() || !delta->is_object()) {
        out.exception = true;  // choices[0]["delta"] raises KeyError
        return out;
      }
    }
    out.has_choices = true;
    return out;
  }
  auto usage = data.find("usage");
  if (usage != data.end() && usage->is_object() && !usage->empty()) {
    out.usage = true;
    auto ct = usage->find("completion_tokens");
    if (ct != usage->end() && ct->is_number() && ct->get<double>() > 0) {
      out.completion_tokens = static_cast<uint32_t>(ct->get<double>());
    }
    auto pt = usage->find("prompt_tokens");
    if (pt != usage->end() && pt->is_number()) {
      out.prompt_tokens = static_cast<int64_t>(pt->get<double>());
    }
  }
  return out;
}

BenchSummary SummarizeVllm(const LoadResult& result, const SloLimits& slo) {
  BenchSummary out;
  out.duration_s = result.duration_s;
  std::vector<double> ttfts, tpots, all_tpots, itls, e2els;
  for (const RequestRecord& r : result.requests) {
    if (r.warmup) continue;
    if (r.cancelled) ++out.cancelled;
    if (!r.vllm_success) {
      ++out.failed;
      continue;
    }
    ++out.completed;
    const uint32_t output_len = r.vllm_output_tokens > 0 ? r.vllm_output_tokens : 1;
    out.total_input_tokens += static_cast<uint64_t>(std::max<int64_t>(r.vllm_prompt_tokens, 0));
    out.total_output_tokens += output_len;
    const double ttft_s = Seconds(r.vllm_chunk_times_ns.front() - r.start_ns);
    const double latency_s = Seconds(r.vllm_chunk_times_ns.back() - r.start_ns);
    double tpot_s = 0;
    if (output_len > 1) {
      tpot_s = (latency_s - ttft_s) / static_cast<double>(output_len - 1);
      tpots.push_back(tpot_s);
    }
    all_tpots.push_back(tpot_s);
    for (size_t i = 1; i < r.vllm_chunk_times_ns.size(); ++i) {
      itls.push_back(Seconds(r.vllm_chunk_times_ns[i] - r.vllm_chunk_times_ns[i - 1]));
    }
    ttfts.push_back(ttft_s);
    e2els.push_back(latency_s);
  }
  const double dur = result.duration_s;
  const double kNaN = std::numeric_limits<double>::quiet_NaN();
  auto per_s = [dur, kNaN](double x) { return dur > 0 ? x / dur : kNaN; };
  out.request_throughput = per_s(out.completed);
  out.output_throughput = per_s(static_cast<double>(out.total_output_tokens));
  out.total_token_throughput =
      per_s(static_cast<double>(out.total_input_tokens + out.total_output_tokens));
  // vLLM's result JSON: request_goodput None without an SLO.
  out.goodput = slo.any() ? per_s(CountGood(slo, ttfts, all_tpots, e2els)) : kNaN;
  out.ttft_ms = VllmStats(std::move(ttfts));
  out.tpot_ms = VllmStats(std::move(tpots));
  out.itl_ms = VllmStats(std::move(itls));
  out.e2el_ms = VllmStats(std::move(e2els));
  return out;
}

}  // namespace servesweep::loadgen
