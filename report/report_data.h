// Everything report.md and report.html show, read once from the results database: the runs
// with their configuration and load level, the curves with knee, best SLO point and Pareto
// frontier, each run's cost, the engine-signal series, and the diagnosis findings.
//
// Thread-safety: built from a store the caller owns; a value afterwards.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "report/comparison.h"
#include "report/diagnosis.h"
#include "report/report_curves.h"
#include "results/cost_model.h"
#include "results/results_store.h"

namespace servesweep::report {

struct ReportRun {
  ComparedRun run;     // label, ok, conditions, system and figures (ok runs)
  bool used = false;   // an ok run the selection uses: in curves, knees, frontiers, findings
  std::string config;  // configuration name: the label without its load level and repeat
  double level = 0;    // concurrency, or the request rate of an open-loop run
  results::Cost cost;
  std::string currency;
  std::optional<double> slo_attainment;
};

struct ConfigCurve {
  Curve curve;  // figures include per_user_tok_per_s (PerUserTokPerS of tpot_median_ms)
  Knee knee;    // on output_throughput
  SloPoint slo;
  std::vector<size_t> frontier;  // points on the (per-user, output/GPU) Pareto frontier
  // Points on the frontier of the least energy per output token at each per-user speed (valid
  // energy only: a curve's energy figures are those of runs with energy_valid = 1).
  std::vector<size_t> energy_frontier;
};

// One run's engine signals over the measured phase (seconds from its start).
struct SignalSeries {
  std::string run_label;
  std::map<std::string, std::vector<XY>> signals;  // kv_cache_usage, running, waiting, preemptions
};

struct ReportData {
  std::string simulation;  // what simulated the results ("" when measured)
  bool open_loop = false;  // some configuration's level is a request rate
  std::vector<ReportRun> runs;
  std::vector<ConfigCurve> curves;
  std::vector<SignalSeries> signals;  // ok runs, index order, at most kMaxSignalRuns
  size_t signal_runs_left_out = 0;
  std::vector<Finding> findings;
  std::vector<ComparedRun> compared;  // for the comparison-group section
  RunSelection selection;             // which ok runs the curves and findings use
  // Ok runs whose engine signals were scraped fewer than kMinPlottedScrapes times in the
  // measured phase (too short to sample), with that count.
  std::vector<std::pair<std::string, uint32_t>> unsampled;
};
constexpr uint32_t kMinPlottedScrapes = 3;
constexpr size_t kMaxSignalRuns = 24;

Status LoadReportData(results::ResultsStore& store, ReportData* out,
                      const RunSelection& selection = {});

// The performance model's time per output token of one request alone (one decode step at
// context input + output / 2), when the model and GPU have profiles (perfmodel/): the hardware
// is sim.hardware, else the shipped profile named in `gpu_model` ("NVIDIA H200" -> h200).
std::optional<double> RooflineTpotMs(schema::RunSpec::Reader spec, const std::string& gpu_model);

// "tp=2 concurrency=16 repeat=1" -> "tp=2": the label without load level and repeat tokens.
std::string ConfigName(const std::string& label);

}  // namespace servesweep::report
