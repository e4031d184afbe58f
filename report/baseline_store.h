// Frozen baselines: a finished sweep's results database kept under a name, so later sweeps are
// compared against the same reference (`servesweep baseline freeze DIR --name NAME`,
// `servesweep compare --baseline NAME DIR`). A name holds generations: when a later sweep's
// conditions differ from the baseline's (another workload or checkpoint), it starts the name's
// next generation instead of being compared. The newest generation is the current one.
//
// The store is a folder (docs/results.md):
//   STORE/NAME/GENERATION/results.db     the frozen sweep's database (a consistent copy)
//   STORE/NAME/GENERATION/baseline.json  name, generation, when, from where, why
// A generation is written under a temporary name and renamed into place, so a reader never sees
// half of one; frozen generations are never changed.
//
// Thread-safety: a BaselineStore is a value; concurrent writers of one name may both fail to
// rename (one wins), never corrupt it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace servesweep::report {

struct BaselineInfo {
  std::string name;
  uint32_t generation = 0;
  int64_t frozen_unix_ms = 0;
  std::string source_dir;  // the sweep's output folder, as an absolute path
  std::string reason;      // "frozen by hand", or "new baseline: workload differs (...)"
  size_t runs = 0, ok_runs = 0;
  std::string dir;  // STORE/NAME/GENERATION: results.db is in it
};

class BaselineStore {
 public:
  explicit BaselineStore(std::string root) : root_(std::move(root)) {}
  // $SERVESWEEP_BASELINES, else $HOME/.local/share/servesweep/baselines.
  static std::string DefaultRoot();

  const std::string& root() const { return root_; }

  // Freezes the finished sweep in `sweep_dir` (its results.db: every run done or failed, at
  // least one ok) as the next generation of `name` (letters, digits, '.', '_', '-').
  Status Freeze(const std::string& sweep_dir, const std::string& name, const std::string& reason,
                BaselineInfo* out) const;
  // The current (newest) generation of `name`; an error names the baselines the store holds.
  Status Current(const std::string& name, BaselineInfo* out) const;
  // Every generation of every name, by name then generation.
  Status List(std::vector<BaselineInfo>* out) const;

 private:
  Status Generations(const std::string& name, std::vector<BaselineInfo>* out) const;
  std::string root_;
};

}  // namespace servesweep::report
