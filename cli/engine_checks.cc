#include "cli/engine_checks.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"

namespace servesweep::cli {

void AddEngineCheckFlags(CLI::App& cmd, EngineCheckFlags& flags, bool skippable) {
  cmd.add_option("--engine-env", flags.engine_envs,
                 "Python environment (virtualenv or bin folder) holding an engine, looked in "
                 "before PATH; repeatable: the one holding each run's engine_version is used");
  cmd.add_option("--model-config", flags.model_configs,
                 "NAME=DIR: check runs of model NAME (or model_path / draft model NAME) against "
                 "the config.json in DIR, when the weights are not here; repeatable");
  cmd.add_option("--check-gpu", flags.gpu,
                 "GPU the engines are told of where nvidia-smi does not answer: h100, h200, "
                 "b200, a100, l4 (default h100)");
  if (skippable) {
    cmd.add_flag("--skip-engine-check", flags.skip,
                 "Start the sweep without handing its engine command lines to the engines' own "
                 "argument handling first (here and on every agent)");
  }
}

Status CheckSweepEngines(matrix::LoadedMatrix& matrix, const EngineCheckFlags& flags,
                         engines::SweepCheck* out) {
  engines::EngineCheckOptions options;
  options.engine_envs = flags.engine_envs;
  options.gpu_preset = flags.gpu;
  options.timeout_s = flags.timeout_s;
  return engines::CheckSweep(matrix.matrix(), flags.model_configs, options, out);
}

int RefuseRejectedSweep(matrix::LoadedMatrix& matrix, const EngineCheckFlags& flags) {
  if (flags.skip) {
    spdlog::warn(
        "engine check skipped (--skip-engine-check): command lines go to the engines "
        "unchecked");
    return -1;
  }
  engines::SweepCheck check;
  if (Status s = CheckSweepEngines(matrix, flags, &check); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  if (check.accepted + check.refused + check.unavailable == 0) return -1;  // nothing to check
  fmt::print("{}{}{}\n", check.Render(true), check.Summary(),
             check.unavailable > 0 ? "; the agents check the others before each run" : "");
  if (check.refused == 0) return -1;
  spdlog::error(
      "{}: the engines refused command lines of this sweep (above); nothing was started. Fix "
      "the matrix, or start it anyway with --skip-engine-check",
      matrix.matrix().getSourcePath().cStr());
  return kExitError;
}

}  // namespace servesweep::cli
