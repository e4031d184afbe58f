// A sweep against a frozen baseline (baseline_store.h). When every matched condition
// (comparison.h: checkpoint, GPUs, workload, load, warm-up, window, SLO) is the baseline's, the
// sweep is compared with the baseline's medians and ranges over its repeats, as
// `servesweep compare` does. When one differs, the sweep starts a new baseline instead: its
// differences would otherwise be read as the effect of the system under test (a flag, an engine).
//
// Thread-safety: plain functions and values.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "report/comparison.h"

namespace servesweep::report {

struct BaselineCheck {
  bool new_baseline = false;
  std::vector<FieldChange> changes;  // the changed conditions, each once, first seen first
  // "workload differs (workload.output_len: fixed:4 -> fixed:8)"; "" when compared.
  std::string reason;
  Comparison comparison;  // when the two share a load point
};

// `baseline` is the frozen sweep (A), `sweep` the later one (B). Sweeps with no load point in
// common start a new baseline ("load differs (load.points: ... -> ...)"). `selection` picks the
// runs compared, as CompareRuns's (certified ones by default).
Status CheckAgainstBaseline(const std::vector<ComparedRun>& baseline,
                            const std::vector<ComparedRun>& sweep, BaselineCheck* out,
                            const RunSelection& selection = {});

// "workload differs (workload.output_len: fixed:4 -> fixed:8)", "checkpoint and workload
// differ (...)": the condition groups (the field names' first part) and every change.
std::string NewBaselineReason(const std::vector<FieldChange>& changes);

}  // namespace servesweep::report
