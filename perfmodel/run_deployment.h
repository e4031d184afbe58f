// The performance model's view of a run spec: which engine profile (by the run's engine and
// version), which model profile, and how its layout, precision and engine settings deploy the
// model (DeploymentConfig). One mapping, used by virtual runs (`plan --simulate`), the emulator's
// adapter (`sim --hardware`) and `servesweep calibrate`, so all simulate the same deployment.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "common/status.h"
#include "perfmodel/deployment.h"
#include "perfmodel/engine_profile.h"
#include "perfmodel/profiles.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::perfmodel {

// The model profile of a run: the spec's sim.model_profile, else the shipped profile whose name
// appears in the run's model name (case-insensitive, e.g. "meta-llama/Llama-3.1-8B-Instruct").
Status ResolveModelProfileName(schema::RunSpec::Reader spec, std::string* name);

// "moe" or "dense" for the run's model profile (ResolveModelProfileName); "" when it has none.
std::string ModelArchitectureOf(schema::RunSpec::Reader spec);

// The shipped engine profile of the run's engine, version and model kind (SelectEngineProfile);
// *why says when it is not an exact match ("" when it is).
Status EngineProfileFor(schema::RunSpec::Reader spec, EngineProfile* out, std::string* why);

// The deployment of a run spec's layout, precision and engine settings, on `engine`: its
// defaults fill what the spec's engine_config leaves unset (0 / default), and its coefficients
// cost the steps. DP attention makes one instance of tp GPUs with dp attention groups (not dp
// replicas); expert parallelism then spans the instance's tp GPUs. vLLM's
// --num-scheduler-steps N in the engine flags sets the decode steps per schedule. `hardware`
// (optional) selects the engine's defaults for its GPU size.
DeploymentConfig DeploymentFor(schema::RunSpec::Reader spec, const EngineProfile& engine,
                               const HardwareProfile* hardware = nullptr);
// The same on the bare roofline's profile (the layout mapping alone, for engine adapters).
DeploymentConfig DeploymentFor(schema::RunSpec::Reader spec);

}  // namespace servesweep::perfmodel
