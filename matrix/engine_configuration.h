// A run's engine configuration: what decides the engine process (engine, version, flags, image,
// model, checkpoint, precision, quantization, KV dtype, layout, engine settings, emulator
// settings), as opposed to the load it is measured under (workload, SLO, repeats, timeouts,
// quality tasks). Runs with the same configuration can be measured on one engine
// (engine_lifecycle: per_configuration). A key of the spec is engine-side unless it is listed
// as the run's own here, so a new field never lets two different engines pass for one.
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "schema/run_spec.capnp.h"

namespace servesweep::matrix {

// "cfg-" and 12 hex digits of a stable hash of the spec's engine-side keys.
std::string EngineConfigurationOf(schema::RunSpec::Reader spec);

}  // namespace servesweep::matrix
