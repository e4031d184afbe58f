// Clocks. Intervals always use std::chrono::steady_clock (CLOCK_MONOTONIC on Linux, shared by all
// processes of a host); wall-clock time is used only to label records for people.
//
// Thread-safety: free functions, safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace servesweep {

inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t UnixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace servesweep
