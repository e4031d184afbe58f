// Engine-side counters and gauges of the emulator, rendered as Prometheus text under vLLM's
// metric names (the scraper is tested against these, so names and label shape follow vLLM).
//
// Thread-safety: every method may be called concurrently (lock-free atomics).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace servesweep::sim {

class Metrics {
 public:
  // A request was admitted: it holds its prompt in the KV cache until it ends.
  void OnRequestStart(int64_t prompt_tok);
  // One output token was produced; it joins the request's KV footprint.
  void OnToken();
  void OnFirstToken(int64_t ttft_ns);
  // The request released held_tok tokens of KV cache; ok = finished by length, else aborted.
  void OnRequestEnd(int64_t held_tok, bool ok);

  std::string RenderPrometheus(const std::string& model_name, int64_t kv_capacity_tok) const;

 private:
  // vLLM's bucket bounds for time_to_first_token_seconds.
  static constexpr std::array<double, 22> kTtftBoundsS = {
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
      1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};

  std::atomic<int64_t> running_{0};
  std::atomic<int64_t> kv_held_tok_{0};
  std::atomic<int64_t> prompt_tok_total_{0};
  std::atomic<int64_t> generation_tok_total_{0};
  std::atomic<int64_t> length_finished_total_{0};
  std::atomic<int64_t> aborted_total_{0};
  // Per-bucket (not cumulative) counts; the last slot is +Inf.
  std::array<std::atomic<int64_t>, kTtftBoundsS.size() + 1> ttft_buckets_{};
  std::atomic<int64_t> ttft_sum_ns_{0};
};

}  // namespace servesweep::sim
