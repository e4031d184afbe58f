// The emulator backed by the performance model: the profiles a `servesweep sim --hardware ...`
// names, turned into a PerfModelCore, with the emulator's settings made to agree with it.
//
// Thread-safety: a function of its arguments.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "perfmodel/deployment.h"
#include "sim/emulator.h"
#include "sim/engine_core.h"

namespace servesweep::sim {

// The performance model's settings: profiles by shipped name or YAML path.
struct ModelBackedOptions {
  std::string hardware;       // required
  std::string model_profile;  // "" = inferred from the served model name
  std::string engine_profile = "default";
  perfmodel::DeploymentConfig deployment;
  bool expert_parallel = false;  // experts over tp x dp GPUs
};

// The model-backed core, and the emulator's settings adjusted to it: requests longer than one
// instance's KV cache are refused up front (as an engine's max_model_len), prefix blocks are
// the model's when it caches prefixes, and unless `startup_given`, /health turns ready after the
// model's cold start. The profiles' own errors (not found, wrong keys) when they do not load.
Status MakeModelBackedCore(const ModelBackedOptions& options, bool startup_given,
                           EmulatorSettings* settings, std::unique_ptr<EngineCore>* out);

}  // namespace servesweep::sim
