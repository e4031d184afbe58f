// A fake nvidia-smi for end-to-end tests on machines without GPUs: tests/data/fake-nvidia-smi
// (two GPUs, GPU 0 gaining 250 J between energy reads, GPU 1 without an energy counter) put
// first on PATH for the processes a test starts, or no nvidia-smi at all.
#pragma once

#include <string>

#include "tests/support/harness.h"

namespace servesweep::testing {

// While it lives, PATH starts with the harness's bin/ folder: with the fake (`install`), or
// without any nvidia-smi (folders that hold a real one are left out). Restores PATH after.
class PathWithFakeNvidiaSmi {
 public:
  PathWithFakeNvidiaSmi(const Harness& h, bool install);
  ~PathWithFakeNvidiaSmi();
  PathWithFakeNvidiaSmi(const PathWithFakeNvidiaSmi&) = delete;
  PathWithFakeNvidiaSmi& operator=(const PathWithFakeNvidiaSmi&) = delete;

 private:
  std::string old_;
};

}  // namespace servesweep::testing
