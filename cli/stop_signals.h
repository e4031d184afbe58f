// SIGINT/SIGTERM handling without a signal handler: main() blocks both before any thread starts,
// and a StopSignals object waits for them on its own thread, calling `on_stop` once. Children
// unblock them again before exec (common/subprocess.cc).
//
// Thread-safety: construct and destroy on the main thread.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace servesweep::cli {

// Call first thing in main(): every thread created later inherits the blocked mask.
void BlockStopSignals();

class StopSignals {
 public:
  explicit StopSignals(std::function<void()> on_stop);
  ~StopSignals();
  bool received() const { return received_.load(); }

 private:
  std::atomic<bool> received_{false};
  std::thread thread_;
};

}  // namespace servesweep::cli
