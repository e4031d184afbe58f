// servesweep sim: an OpenAI-compatible engine emulator (the ground truth the load generator is
// tested against). It shares no measuring code with the load generator; they meet over HTTP only.
//
// Thread-safety: an Emulator is driven by its own io threads; Stop() may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace servesweep::sim {

struct EmulatorSettings {
  std::string host = "127.0.0.1";
  uint16_t port = 0;               // 0 = let the kernel pick; see Emulator::port()
  std::string model_name = "sim-model";
  double ttft_ms = 20;             // request arrival -> first token chunk
  double itl_ms = 5;               // between successive token chunks
  double startup_ms = 0;           // /health answers 503 until this much time has passed
  int io_threads = 1;
  std::string request_log_path;    // JSONL ground truth: one line per finished request ("" = off)
  std::string persona = "vllm";    // metric names on /metrics: "vllm" (SGLang persona comes later)
  int64_t max_model_len = 131072;  // prompt + max_tokens above this is a 400, as in vLLM
  int64_t kv_capacity_tok = 1000000;  // denominator of vllm:kv_cache_usage_perc
};

class Emulator {
 public:
  explicit Emulator(EmulatorSettings settings);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  // Binds and listens; throws std::runtime_error with the address on failure.
  void Start();
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
