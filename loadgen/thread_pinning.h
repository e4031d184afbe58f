// Load threads pinned one per core (LoadSettings::pin_threads): without pinning, the scheduler
// moves a load thread onto the core the server (or another load thread) is using now and then,
// and the same run's rate then varies by a third between runs (bench/README.md#load-generator-
// speed). Thread k goes on the k-th CPU the process may use (its affinity mask, as taskset or
// Slurm's cgroup set it), wrapping around; the thread that ran loop 0 gets its mask back after.
//
// Thread-safety: each call acts on the calling thread only.
#pragma once

#include <sched.h>

#include <cstddef>
#include <vector>

namespace servesweep::loadgen {

// The CPUs the calling thread may run on, in increasing order (empty when unknown).
std::vector<int> AllowedCpus();

// While alive, the calling thread runs only on `cpus[k % cpus.size()]`; restores the mask it
// had. Does nothing when `cpus` is empty or the kernel refuses (pinning is an optimisation).
class ScopedPin {
 public:
  ScopedPin(const std::vector<int>& cpus, size_t k);
  ~ScopedPin();
  ScopedPin(const ScopedPin&) = delete;
  ScopedPin& operator=(const ScopedPin&) = delete;

  bool pinned() const { return pinned_; }

 private:
  cpu_set_t before_{};
  bool pinned_ = false;
};

}  // namespace servesweep::loadgen
