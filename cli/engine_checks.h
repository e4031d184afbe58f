// The engine check's flags and its verdict at the command line: `plan --check-engines` prints it,
// `run` and `submit` refuse a sweep with a rejected command line unless --skip-engine-check. The
// check itself is engines/sweep_check.h.
//
// Thread-safety: call from the main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "engines/sweep_check.h"
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

// Checks every engine process of `matrix`'s runs (each rank, addresses 10.0.0.<rank+1>).
Status CheckSweepEngines(matrix::LoadedMatrix& matrix, const EngineCheckFlags& flags,
                         engines::SweepCheck* out);

// run/submit: the check where they are started; a rejected command line refuses the sweep
// (kExitError after printing why) unless flags.skip. Returns the exit code, or -1 to go on.
int RefuseRejectedSweep(matrix::LoadedMatrix& matrix, const EngineCheckFlags& flags);

}  // namespace servesweep::cli
