// Typed reads of results.db for its readers outside results/: the report, the sweep driver's
// end-of-sweep lines and calibration. The SQL and the column order live here only; callers get
// fields with names and units, verdicts as enums, and every failed query as a Status.
//
// Thread-safety: each function runs its queries on the store it is given (a store belongs to one
// thread).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "results/results_store.h"
#include "schema/result.capnp.h"

namespace servesweep::results {

// An ok run that every user should look at: invalid (every request failed among them) or
// client-bound.
struct UncertifiedRun {
  std::string label;
  int64_t completed = 0;
  int64_t failed = 0;
  schema::Validity validity = schema::Validity::NOT_JUDGED;
  std::string validity_reasons;
  bool client_bound = false;
  std::string client_bound_reasons;
  std::string failure_reasons;
};
// In the matrix's run order.
Status LoadUncertifiedRuns(ResultsStore& store, std::vector<UncertifiedRun>* out);

// The agents' pre-flight probe reports, one per agent, and every figure they flagged.
struct NodeProbeReport {
  std::string agent_id;
  std::string gpu_model;
  std::string status;
  bool healthy = false;
  bool excluded = false;  // left out of the sweep
};
struct FlaggedProbe {
  std::string agent_id;
  std::string reason;
};
Status LoadNodeProbes(ResultsStore& store, std::vector<NodeProbeReport>* reports,
                      std::vector<FlaggedProbe>* flagged);

// The sweep's meta entries (sweep_name, matrix_path, matrix_hash, servesweep_version, ...),
// without the matrix text.
Status LoadSweepMeta(ResultsStore& store, std::map<std::string, std::string>* out);

// The simulation of the sweep's simulated runs ("" when every run was measured).
Status LoadSimulationKind(ResultsStore& store, std::string* out);

// The GPUs the sweep could use, and for how long: every agent's GPUs (emulated ones included)
// from the first committed result's start to the last one's end. 0 and 0 without results.
struct SweepGpuSpan {
  double agent_gpus = 0;
  double span_s = 0;
};
Status LoadSweepGpuSpan(ResultsStore& store, SweepGpuSpan* out);

// run_id -> the GPU model its record names.
Status LoadGpuModels(ResultsStore& store, std::map<std::string, std::string>* out);

// The engine signals the report plots (kv_cache_usage, running, waiting, preemptions), by run
// and time.
struct EngineSample {
  std::string run_id;
  int64_t at_ns = 0;
  std::string name;
  double value = 0;
};
Status LoadPlottedSignals(ResultsStore& store, std::vector<EngineSample>* out);

// Each successful request's prompt length and TTFT (from the send, or the start where the send
// was not stamped), by run in request order.
struct RequestTtft {
  std::string run_id;
  double prompt_tok = 0;
  double ttft_ms = 0;
  int64_t start_ns = 0;
};
Status LoadRequestTtfts(ResultsStore& store, std::vector<RequestTtft>* out);

// A multi-LoRA run's figures per adapter (docs/metrics.md#per-adapter), by run in the matrix's
// order, then by adapter; the base model's row has adapter "". NaN where the record has none.
struct AdapterFigures {
  std::string label;  // the run's
  std::string adapter;
  int64_t requests = 0;
  int64_t completed = 0;
  double output_tok_per_s = 0;
  double ttft_mean_ms = 0, ttft_p90_ms = 0;
  double tpot_mean_ms = 0, tpot_p90_ms = 0;
};
Status LoadAdapterFigures(ResultsStore& store, std::vector<AdapterFigures>* out);

// Chosen record columns of every ok result (calibration's measured figures): one value per
// column asked, nullopt where the record stores NULL. InvalidArgument for a name that is no
// record column (results/record_columns.h).
struct ResultFigures {
  std::string simulation;  // "none" for a measured run
  std::vector<std::optional<double>> values;
};
Status LoadOkResultFigures(ResultsStore& store, const std::vector<std::string>& columns,
                           std::map<std::string, ResultFigures>* by_run_id);

}  // namespace servesweep::results
