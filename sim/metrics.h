// Front-end counters and histograms of the emulator (tokens, requests, TTFT, ITL, end-to-end
// latency), rendered with the engine-side gauges of an EngineSnapshot as Prometheus text under
// the metric names and label sets of one engine: vLLM (persona "vllm") or SGLang ("sglang").
// The scraper is tested against this text, so names, types and labels follow the engines.
//
// Thread-safety: every method may be called concurrently (lock-free atomics; rendering takes a
// mutex for the rate gauges it derives between scrapes).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "sim/engine_core.h"

namespace servesweep::sim {

enum class Persona { kVllm, kSglang };

// Parses "vllm" / "sglang"; InvalidArgument naming the accepted values otherwise.
Status ParsePersona(std::string_view name, Persona* out);

class Metrics {
 public:
  void OnRequestStart(int64_t prompt_tok);
  void OnTokens(int64_t count);
  void OnFirstToken(int64_t ttft_ns);
  // A chunk of `tokens` tokens followed the previous one after interval_ns (SGLang observes
  // interval / tokens, tokens times).
  void OnChunkInterval(int64_t interval_ns, int64_t tokens);
  // ok = finished by length, else aborted.
  void OnRequestEnd(bool ok, int64_t e2e_ns);

  // process_start_s: when the engine process started (Unix seconds), as vLLM's
  // process_start_time_seconds (prometheus_client's process collector) says it.
  std::string RenderPrometheus(Persona persona, const std::string& model_name,
                               const EngineSnapshot& engine, int64_t process_start_s) const;

 private:
  // Per-bucket (not cumulative) counts; the last slot is +Inf.
  template <size_t N>
  struct Histogram {
    const std::array<double, N>* bounds_s;
    std::array<std::atomic<int64_t>, N + 1> buckets{};
    std::atomic<int64_t> sum_ns{0};

    void Observe(int64_t value_ns, int64_t times = 1);
    void Render(std::string& out, std::string_view name, std::string_view labels) const;
  };

  // vLLM's bucket bounds for time_to_first_token_seconds.
  static constexpr std::array<double, 22> kVllmTtftBoundsS = {
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
      1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
  // SGLang's defaults (TokenizerMetricsCollector).
  static constexpr std::array<double, 18> kSglangTtftBoundsS = {
      0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400};
  static constexpr std::array<double, 22> kSglangE2eBoundsS = {
      0.1, 0.2, 0.4, 0.6, 0.8, 1,   2,   4,   6,    8,    10,
      20,  40,  60,  80,  100, 200, 400, 600, 1200, 1800, 2400};
  static constexpr std::array<double, 23> kSglangItlBoundsS = {
      0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
      0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000};

  void RenderVllm(std::string& out, const std::string& model_name,
                  const EngineSnapshot& engine) const;
  void RenderSglang(std::string& out, const std::string& model_name,
                    const EngineSnapshot& engine) const;

  std::atomic<int64_t> prompt_tok_total_{0};
  std::atomic<int64_t> generation_tok_total_{0};
  std::atomic<int64_t> length_finished_total_{0};
  std::atomic<int64_t> aborted_total_{0};
  Histogram<kVllmTtftBoundsS.size()> vllm_ttft_{&kVllmTtftBoundsS};
  Histogram<kSglangTtftBoundsS.size()> sglang_ttft_{&kSglangTtftBoundsS};
  Histogram<kSglangE2eBoundsS.size()> sglang_e2e_{&kSglangE2eBoundsS};
  Histogram<kSglangItlBoundsS.size()> sglang_itl_{&kSglangItlBoundsS};

  // SGLang's gen_throughput and num_retracted_reqs are rates/deltas between its log points; the
  // emulator takes them between scrapes.
  mutable std::mutex scrape_mu_;
  mutable int64_t last_scrape_ns_ = 0;           // guarded by scrape_mu_
  mutable int64_t last_scrape_gen_tok_ = 0;      // guarded by scrape_mu_
  mutable int64_t last_scrape_preemptions_ = 0;  // guarded by scrape_mu_
};

}  // namespace servesweep::sim
