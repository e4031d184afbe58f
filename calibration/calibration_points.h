// The points `servesweep calibrate` fits and checks: measured runs from a results database, and
// published figures from a YAML table (each case: its source, conditions, a servesweep matrix
// that reproduces them, the figures of some of its runs, and the error bound it must meet), and
// their predictions (a virtual run of each point's spec through the performance model).
//
// The table (tests/fidelity/published.yaml is the shipped one):
//   median_bound_pct: 20                  # over every bounded figure
//   cases:
//     - name: llama70b-h100-tp4-sharegpt
//       source: "sgl-project/sglang benchmark/benchmark_vllm_060/README.md (commit 120affb9)"
//       conditions: "4 x H100 80G, TP 4, ShareGPT, Poisson 4 and 8 req/s; medians"
//       verified: true                    # false: the source was not found; reported only
//       matrix: published/llama70b.yaml   # relative to the table
//       bound_pct: 30                     # the case's median |error|; 0 = reported only
//       engine_profile: default           # optional: evaluate with this profile
//       points:
//         - match: {engine: sglang, request_rate: 4}    # exactly one run of the matrix
//           figures: {e2el_median_ms: 3005.24, ttft_median_ms: 53.94}
//           exclude: "client-bound ..."   # optional: reported, never fitted or bounded
// Figure names are results-table columns (docs/results.md): ttft_median_ms, tpot_mean_ms,
// e2el_p99_ms, output_throughput, output_throughput_per_gpu, ...
//
// Thread-safety: plain values and functions; one thread.
#pragma once

#include <capnp/message.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "perfmodel/calibration.h"
#include "record/virtual_run.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::calibration {

struct CalibrationPoint {
  std::string id;         // "case: engine=sglang request_rate=4", or "db: run id"
  std::string case_name;  // the published case, or the database's path
  std::string source;
  bool verified = true;
  std::string excluded;        // why it is neither fitted nor bounded ("" = it is)
  bool held_out = false;       // predicted, not fitted (calibrate --holdout)
  std::string engine_profile;  // the case's profile override ("" = the run's own)
  std::shared_ptr<capnp::MallocMessageBuilder> spec;  // root: schema::RunSpec
  std::vector<std::string> metrics;                   // results-table columns
  std::vector<double> measured;
  schema::RunSpec::Reader Spec() const { return spec->getRoot<schema::RunSpec>().asReader(); }
};

struct PublishedCase {
  std::string name, source, conditions, engine_profile;
  bool verified = true;
  double bound_pct = 0;  // 0: reported only
};

struct PointSet {
  std::vector<CalibrationPoint> points;
  std::vector<PublishedCase> cases;
  double median_bound_pct = 0;  // the table's bound over all bounded figures (0: none)
};

// Appends a table's cases and points; errors are file:line:column.
Status LoadPublishedTable(const std::string& path, PointSet* out);

// Appends a results database's finished runs with their measured `metrics`; `model_profile`
// (optional) is set on specs whose model name names no shipped profile (a served alias).
Status LoadMeasuredRuns(const std::string& db_path, const std::vector<std::string>& metrics,
                        const std::string& model_profile, PointSet* out);

// Which points' specs match every `key=value` of `selector` (keys as in a case's match:
// engine, model, engine_version, concurrency, request_rate, input_len, output_len, num_requests,
// tp, dp, dp_attention, index; a value "a|b" matches either), one flag per point.
// InvalidArgument on an unknown key.
Status Select(const std::string& selector, const PointSet& points, std::vector<bool>* out);

struct Prediction {
  std::vector<double> figures;  // one per metric; NaN when the run failed
  perfmodel::RunShape shape;
  Status status;  // the virtual run's failure (its figures NaN), or its shape's; Ok when it ran
};

// The point's figures from a virtual run of its spec.
Prediction Predict(const CalibrationPoint& point, const record::VirtualRunOptions& options);

}  // namespace servesweep::calibration
