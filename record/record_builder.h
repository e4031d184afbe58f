// Builds the benchmark record of a run: its conditions (from the run spec and the node), the
// figures (from the load generator's summary) and the engine signals (from /metrics scrapes).
// Text conditions that do not apply say "n/a: <why>"; they are never left blank.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "loadgen/answer_client.h"
#include "loadgen/bench_metrics.h"
#include "record/run_energy.h"
#include "record/run_validity.h"
#include "schema/result.capnp.h"
#include "schema/run_spec.capnp.h"
#include "scraper/metrics_scraper.h"
#include "workload/load_settings.h"

namespace servesweep::record {

struct NodeFacts {
  std::string gpu_model;
  std::string interconnect;
  std::string engine_version;
  std::string engine_commit;
  std::string model_fingerprint;  // of the local weights or config; recorded as the checkpoint
                                  // revision when the matrix names none
  std::string driver_version;     // GPU driver, CUDA (as the driver reports it), NCCL
  std::string cuda_version;
  std::string nccl_version;
  std::string gpu_topology;      // `nvidia-smi topo -m`
  std::string why_no_gpu_facts;  // why the four above are unknown, e.g. "no nvidia-smi on agent a"
};

// The run's conditions: from the spec and the node; filled for every result, failed or not.
// `load`: the run's load settings as derived once (record/run_settings.h).
void FillConditions(schema::RunSpec::Reader spec, const NodeFacts& node,
                    const loadgen::LoadSettings& load, schema::BenchmarkRecord::Builder record);

// The measured figures and engine signals of a run whose load completed.
void FillFigures(schema::RunSpec::Reader spec, const loadgen::BenchSummary& summary,
                 const std::vector<scraper::ScrapedSample>& samples, double cold_start_ms,
                 schema::BenchmarkRecord::Builder record);

// GPU telemetry of the measured phase: the summary of `samples` (gpu<i>.* series), or NaN and
// "n/a: <why_none>" without any.
void FillGpuTelemetry(const std::vector<scraper::ScrapedSample>& samples,
                      const std::string& why_none, schema::BenchmarkRecord::Builder record);
// The run's energy (record/run_energy.h) and its figures per completed request, per output and
// per total token; after FillFigures (which sets the counts). Per token figures are NaN where
// energy_j is (unknown) or nothing was counted.
void FillEnergy(const RunEnergy& energy, schema::BenchmarkRecord::Builder record);
// An energy that was not measured, and why ("simulated run").
RunEnergy NoEnergy(const std::string& why);
// The quality gate: the spec's tasks scored against the answers (exact match after
// normalisation, workload/task_set.h). A failed request counts as a wrong answer.
struct QualityScore {
  uint32_t tasks = 0;
  uint32_t correct = 0;
  uint32_t failed = 0;      // requests that got no answer
  std::string first_error;  // of the first failed request
};
QualityScore ScoreQuality(schema::RunSpec::Reader spec,
                          const std::vector<loadgen::Answer>& answers);
void FillQuality(const QualityScore& score, schema::BenchmarkRecord::Builder record);

void FillStats(const loadgen::Stats& stats, schema::LatencyStats::Builder out);

// The validity gate's verdict, reasons and reconciliation (run_validity.h) into the record.
void FillValidity(const Validity& validity, schema::BenchmarkRecord::Builder record);

// One request as the load generator recorded it, into the result's per-request records.
// `adapter_names`: LoadResult::adapter_names, which RequestRecord::adapter indexes.
void CopyRequestRecord(const loadgen::RequestRecord& in, schema::RequestRecord::Builder out,
                       const std::vector<std::string>& adapter_names = {});

}  // namespace servesweep::record
