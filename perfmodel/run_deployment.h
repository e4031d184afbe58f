// The performance model's view of a run spec: how its layout, precision and engine settings
// deploy the model (DeploymentConfig), and which model profile describes it. One mapping, used by
// virtual runs (`plan --simulate`) and by the emulator's adapter (`sim --hardware`), so both
// simulate the same deployment.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "common/status.h"
#include "perfmodel/deployment.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::perfmodel {

// The model profile of a run: the spec's sim.model_profile, else the shipped profile whose name
// appears in the run's model name (case-insensitive, e.g. "meta-llama/Llama-3.1-8B-Instruct").
Status ResolveModelProfileName(schema::RunSpec::Reader spec, std::string* name);

// The deployment of a run spec's layout, precision and engine settings.
DeploymentConfig DeploymentFor(schema::RunSpec::Reader spec);

}  // namespace servesweep::perfmodel
