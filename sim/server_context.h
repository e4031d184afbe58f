// State shared by every connection of one Emulator: settings, the readiness instant, metrics,
// the timing core's driver, the request log and the request id sequence.
//
// Thread-safety: immutable after the Emulator's Start(), except metrics, request_log and
// next_seq, which are safe for concurrent use, and driver (see engine_driver.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "sim/emulator.h"
#include "sim/engine_driver.h"
#include "sim/metrics.h"
#include "sim/request_log.h"

namespace servesweep::sim {

struct ServerContext {
  EmulatorSettings settings;
  Persona persona = Persona::kVllm;
  std::string model_json;  // settings.model_name as a JSON string literal, rendered once
  int64_t created_s = 0;   // wall-clock seconds, for the "created" fields
  std::chrono::steady_clock::time_point ready_at;  // /health says 503 before this
  std::chrono::nanoseconds stall{0};               // settings.faults.stall_ms
  Metrics metrics;
  EngineDriver* driver = nullptr;           // owned by the Emulator; set by Start()
  std::unique_ptr<RequestLog> request_log;  // null when settings.request_log_path is empty
  std::atomic<uint64_t> next_seq{0};
};

}  // namespace servesweep::sim
