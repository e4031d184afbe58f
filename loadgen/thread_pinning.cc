#include "loadgen/thread_pinning.h"

#include <pthread.h>

namespace servesweep::loadgen {

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

ScopedPin::ScopedPin(const std::vector<int>& cpus, size_t k) {
  if (cpus.empty()) return;
  if (pthread_getaffinity_np(pthread_self(), sizeof before_, &before_) != 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[k % cpus.size()], &one);
  pinned_ = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

ScopedPin::~ScopedPin() {
  if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof before_, &before_);
}

}  // namespace servesweep::loadgen
