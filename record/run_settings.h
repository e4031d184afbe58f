// What a run's spec asks of its load and of its figures, derived from the spec once per run and
// handed to everything that needs it (the executor's load, the record's conditions, a virtual
// run's workload, the goodput): the load generator's settings (workload/load_settings.h) and the
// SLO limits its goodput counts against.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "loadgen/bench_metrics.h"
#include "schema/run_spec.capnp.h"
#include "workload/load_settings.h"

namespace servesweep::record {

struct RunSettings {
  loadgen::LoadSettings load;
  loadgen::SloLimits slo;
};

// `base_url`: the engine's, "" where no request is sent (a virtual run, a record's conditions).
RunSettings RunSettingsFor(schema::RunSpec::Reader spec, const std::string& base_url);

}  // namespace servesweep::record
