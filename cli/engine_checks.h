// The engine check over a whole sweep, before it starts: `plan --check-engines` prints it, `run`
// and `submit` refuse a sweep with a rejected command line unless --skip-engine-check. Every
// engine process of every run and rank (engines/launch_plan.h) goes to the engine's own
// argument handling where it is installed (engines/engine_check.h).
//
// Thread-safety: call from the main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "engines/engine_check.h"
#include "matrix/matrix_loader.h"

namespace servesweep::cli {

struct EngineCheckFlags {
  std::vector<std::string> engine_envs;    // --engine-env DIR
  std::vector<std::string> model_configs;  // --model-config NAME=DIR
  std::string gpu;                         // --check-gpu PRESET
  double timeout_s = 600;
  bool skip = false;  // run/submit: --skip-engine-check
};

// --engine-env, --model-config, --check-gpu (and --skip-engine-check when `skippable`).
void AddEngineCheckFlags(CLI::App& cmd, EngineCheckFlags& flags, bool skippable);

struct ProcessVerdict {
  std::string run_id, label, process;  // process: "head rank 0 [prefill0]"
  engines::CheckVerdict verdict;
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

// Checks every engine process of `matrix`'s runs (each rank, addresses 10.0.0.<rank+1>).
Status CheckSweepEngines(matrix::LoadedMatrix& matrix, const EngineCheckFlags& flags,
                         SweepCheck* out);

// run/submit: the check where they are started; a rejected command line refuses the sweep
// (kExitError after printing why) unless flags.skip. Returns the exit code, or -1 to go on.
int RefuseRejectedSweep(matrix::LoadedMatrix& matrix, const EngineCheckFlags& flags);

}  // namespace servesweep::cli
