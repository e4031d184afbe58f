#include "cli/stop_signals.h"

#include <pthread.h>
#include <signal.h>

namespace servesweep::cli {
namespace {

sigset_t StopSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);  // used only to wake the waiting thread at destruction
  return set;
}

}  // namespace

void BlockStopSignals() {
  sigset_t set = StopSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

StopSignals::StopSignals(std::function<void()> on_stop) {
  thread_ = std::thread([this, on_stop = std::move(on_stop)] {
    sigset_t set = StopSet();
    int signal = 0;
    while (sigwait(&set, &signal) == 0) {
      if (signal == SIGUSR1) return;
      received_.store(true);
      on_stop();
    }
  });
}

StopSignals::~StopSignals() {
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

}  // namespace servesweep::cli
