// The engine check over a whole sweep, before it starts: every engine process of every run and
// rank (launch_plan.h) goes to the engine's own argument handling where it is installed
// (engine_check.h). `plan --check-engines` prints it; `run` and `submit` refuse a sweep with a
// rejected command line unless told to skip it.
//
// Thread-safety: CheckSweep runs child processes and blocks; call it from one thread.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "engines/engine_check.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::engines {

struct ProcessVerdict {
  std::string run_id, label, process;  // process: "head rank 0 [prefill0]"
  CheckVerdict verdict;
};

struct SweepCheck {
  std::vector<ProcessVerdict> processes;
  std::vector<std::string> unproven;  // runs outside a checked flag table the check did not prove
  size_t accepted = 0, refused = 0, not_checked = 0, unavailable = 0;
  bool ok() const { return refused == 0 && unproven.empty(); }
  std::string Summary() const;  // "engine check: 14 of 16 command lines accepted (...)"
  // Every process not accepted (or only the refused ones), and the engines' warnings on the
  // accepted ones.
  std::string Render(bool refused_only = false) const;
};

// NAME=DIR items (--model-config): a model name or path of the matrix, and a folder holding its
// config.json. InvalidArgument, with the item, for any other shape.
Status ParseModelConfigs(const std::vector<std::string>& items,
                         std::map<std::string, std::string>* out);

// Checks every engine process of `matrix`'s runs (each rank, addresses 10.0.0.<rank+1>), each
// run's model read from the config folder `model_configs` names for it, if any.
Status CheckSweep(schema::Matrix::Reader matrix, const std::vector<std::string>& model_configs,
                  const EngineCheckOptions& options, SweepCheck* out);

}  // namespace servesweep::engines
