// A run executed in virtual time: instead of starting an engine and sending HTTP load, the run
// spec's workload goes through the performance model (perfmodel/), and the requests it
// simulates are measured with the same metric code as real runs (loadgen::Summarize,
// FillFigures). The result is a RunResult like the executor's, marked simulated in its record,
// so `servesweep plan --simulate` writes the same results database and reports as a sweep.
//
// The run's engine and version choose the engine profile (perfmodel/engine_profile.h) unless
// the options name one; every record says which, its calibration and fit error, and whether the
// run lies inside what it was fitted on (calibrated / extrapolated / uncalibrated).
//
// What a virtual run does not model: warm-up requests of count mode (the model has no JIT or
// cache state to warm; they are skipped), prompt text (lengths only), the drain timeout, and
// client overheads. `workload.early_stop` is judged as the load generator judges it, on the
// simulated requests (loadgen::JudgeAfterTheFact), and the phase is cut where it would stop.
// Multi-turn sessions are refused (turns wait on answers' text); duration mode runs its timed
// window (closed loop until the window ends, or the open-loop schedule up to it); constant gaps and
// ramps use the load generator's own schedule.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "loadgen/early_stop.h"
#include "perfmodel/calibration.h"
#include "perfmodel/engine_profile.h"
#include "perfmodel/error_bands.h"
#include "schema/result.capnp.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::record {

struct VirtualRunOptions {
  std::string default_hardware;  // for runs whose spec names no sim.hardware
  // Engine profiles that replace the shipped choice: the first whose engine is the run's (or
  // "any") costs it (plan --engine-profile; calibrate's candidate coefficients).
  std::vector<perfmodel::EngineProfile> engine_profiles;
  // The cross-validated bands runs are labelled with (plan --error-bands); none: the shipped
  // profiles/error_bands.yaml.
  std::optional<perfmodel::ErrorBands> error_bands;
};

// Which calibration a simulated run stands on (the record's calibration fields).
struct CalibrationLabel {
  std::string calibration;  // "vllm-0.8 (fitted ...)" / "default (uncalibrated)"
  // The error to expect, %: the fit's when calibrated; when extrapolated, the larger of the
  // fit's and the model's typical error where it was not fitted; the typical error when
  // uncalibrated.
  double error_pct = 0;
  std::string standing;  // "calibrated", "extrapolated: ...", "uncalibrated: ..."
  // How far the run lies from the fit, and the cross-validated error of figures like it
  // (perfmodel/error_bands.h; unknown while too few cases of the kind were held out).
  perfmodel::ExtrapolationKind kind = perfmodel::ExtrapolationKind::kUncalibrated;
  perfmodel::KindBand band;
};

// What one simulated run gave.
struct SimulatedRun {
  std::string hardware;  // profile names used
  std::string model;
  std::string engine_profile;
  CalibrationLabel label;
  double cold_start_s = 0;  // process start -> ready (weights, graphs)
  double max_power_w = 0;   // per GPU, the hardware profile's (0 = not known)
  double duration_s = 0;    // measured phase: first request sent -> last one done
  uint32_t completed = 0;
  uint32_t rejected = 0;  // never fit in the KV cache
  // workload.early_stop as the load generator would have judged the simulated phase (kNone: its
  // full length); duration_s and completed are the stopped phase's.
  loadgen::StopReason stopped = loadgen::StopReason::kNone;
  std::string stop_evidence;
};

// The engine profile that costs `spec`: the first of options.engine_profiles whose engine is the
// run's (or "any") and whose kind of model covers the run's (a MoE-only profile never costs a
// dense model), else the shipped choice; `why` says how it was chosen when not an exact match.
Status ChooseEngineProfile(schema::RunSpec::Reader spec, const VirtualRunOptions& options,
                           perfmodel::EngineProfile* out, std::string* why);

// Runs `spec`'s workload through the model (no record); fails on unknown profiles or a layout
// whose weights do not fit.
Status SimulateRun(schema::RunSpec::Reader spec, const VirtualRunOptions& options,
                   SimulatedRun* out);
Status SimulateRun(schema::RunSpec::Reader spec, const std::string& default_hardware,
                   SimulatedRun* out);

// A run's shape as calibrations describe what they were fitted on: the hardware and model
// profiles it resolves to, its layout, and from its record the mean lengths and the mean
// requests in flight (request throughput x mean E2E, Little's law).
Status RunShapeOf(schema::RunSpec::Reader spec, const VirtualRunOptions& options,
                  double mean_input_tok, double mean_output_tok, double mean_in_flight,
                  perfmodel::RunShape* out);

// Simulates `spec` and fills `result` (status ok, or failed with the reason).
void ExecuteVirtualRun(schema::RunSpec::Reader spec, const VirtualRunOptions& options,
                       schema::RunResult::Builder result);
void ExecuteVirtualRun(schema::RunSpec::Reader spec, const std::string& default_hardware,
                       schema::RunResult::Builder result);

}  // namespace servesweep::record
