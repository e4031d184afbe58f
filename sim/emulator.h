// servesweep sim: an OpenAI-compatible engine emulator (the ground truth the load generator is
// tested against). It shares no measuring code with the load generator; they meet over HTTP only.
// When tokens appear is decided by a timing core (engine_core.h): the fixed schedule below by
// default, or any EngineCore passed to the constructor (e.g. a performance model).
//
// Thread-safety: an Emulator is driven by its own io threads; Stop() may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace servesweep::sim {

class EngineCore;

// Injected faults. Deterministic given seed: whether request n (the n-th completion request,
// from 0) is hit is a function of (seed, n) alone.
struct FaultSettings {
  uint64_t seed = 1;
  double error_rate = 0;             // fraction of completion requests answered 500 (OpenAI body)
  double stall_probability = 0;      // fraction of streams that pause...
  int64_t stall_after_tok = 0;       // ...once this many tokens have been sent...
  double stall_ms = 0;               // ...for this long (later tokens shift by stall_ms)
  int64_t crash_after_requests = 0;  // > 0: the process dies (SIGKILL) when request N+1 arrives
  double broken_event_rate = 0;      // fraction of streams with one event whose JSON is cut short
  double truncate_rate = 0;          // fraction of streams cut mid-chunk (connection closed)
  // Fraction of streams that end at once without a token: 200, the usage event (0 completion
  // tokens) and [DONE]; the request is counted finished on /metrics, as an engine would.
  double empty_stream_rate = 0;
  // The usage event reports this many completion tokens fewer than were generated (and counted
  // on /metrics): the client's and the engine's counts disagree (floored at 0).
  int64_t usage_undercount_tok = 0;
  // The cache-reset endpoints answer success and reset nothing (an engine whose reset is
  // broken: the agent's check must notice).
  bool ignore_cache_reset = false;
};

struct EmulatorSettings {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0 = let the kernel pick; see Emulator::port()
  std::string model_name = "sim-model";
  // The fixed schedule (used when no core is given): chunk j at arrival + ttft + j * itl.
  double ttft_ms = 20;           // request arrival -> first token chunk
  double itl_ms = 5;             // between successive token chunks
  int32_t tokens_per_chunk = 1;  // tokens per chunk (> 1: speculative decoding's steps)
  double startup_ms = 0;         // /health answers 503 until this much time has passed
  int io_threads = 1;
  std::string request_log_path;    // JSONL ground truth: one line per finished request ("" = off)
  std::string persona = "vllm";    // metric names on /metrics: "vllm" or "sglang"
  int64_t max_model_len = 131072;  // prompt + max_tokens above this is a 400, as in vLLM
  int64_t kv_capacity_tok = 1000000;  // the fixed schedule's KV-cache size (usage denominator)
  // > 0: each prompt's full blocks of this many tokens are hashed for the core's prefix cache
  // (the performance model's; the fixed schedule ignores them).
  int64_t prefix_block_tok = 0;
  FaultSettings faults;
  // Arithmetic questions in the quality task set's format are answered correctly with this
  // probability (a hash of answer_seed and the question decides), else wrongly; the answer is
  // token 0 of the reply, so the token count and timing are unchanged.
  double answer_accuracy = 1;
  uint64_t answer_seed = 1;
  // Non-empty: /v1/* answers 401 (OpenAI's invalid_api_key body) unless the request carries
  // `Authorization: Bearer <api_key>`, as a managed API does; /health and /metrics stay open.
  std::string api_key;
  // Multi-LoRA: adapter names served as models beside model_name (vLLM's --lora-modules), and,
  // on the fixed schedule, max_loras slots (0: all loaded) and the load a miss pays
  // (FixedScheduleSettings). The performance-model core serves the names without a cost.
  std::vector<std::string> lora_adapters;
  int32_t max_loras = 0;
  double lora_load_ms = 20;
};

class Emulator {
 public:
  // Uses the fixed schedule from settings.
  explicit Emulator(EmulatorSettings settings);
  // Uses core for all timing (and engine-side metrics); ttft_ms, itl_ms, tokens_per_chunk and
  // kv_capacity_tok are then unused.
  Emulator(EmulatorSettings settings, std::unique_ptr<EngineCore> core);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  // Checks the settings (InvalidArgument), then binds and listens (Unavailable, with the
  // address, when the port cannot be had).
  Status Start();
  // The bound port (valid after Start()).
  uint16_t port() const;
  // Serves until Stop(); returns after the io threads have joined.
  void Run();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace servesweep::sim
