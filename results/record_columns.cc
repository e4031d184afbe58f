#include "results/record_columns.h"

#include <fmt/format.h>

#include <limits>
#include <string_view>

#include "results/cost_model.h"

namespace servesweep::results {
namespace {

using Result = schema::RunResult::Reader;
using Record = schema::BenchmarkRecord::Reader;
using Stats = schema::LatencyStats::Reader;

void Text(std::vector<RecordColumn>& out, std::string name,
          std::function<std::string(Record)> get) {
  out.push_back({std::move(name), "TEXT",
                 [get](Result r) -> ColumnValue { return get(r.getRecord()); }, false, true});
}
void Int(std::vector<RecordColumn>& out, std::string name, std::function<int64_t(Record)> get) {
  out.push_back({std::move(name), "INTEGER",
                 [get](Result r) -> ColumnValue { return get(r.getRecord()); }, false, true});
}
void Real(std::vector<RecordColumn>& out, std::string name, std::function<double(Record)> get) {
  out.push_back({std::move(name), "REAL",
                 [get](Result r) -> ColumnValue { return get(r.getRecord()); }, false, true});
}

// Distribution columns of one latency metric: <metric>_mean_ms, _median_ms, ... as listed.
void StatsColumns(std::vector<RecordColumn>& out, const std::string& metric,
                  const std::string& unit, std::function<Stats(Record)> get,
                  std::initializer_list<std::string_view> which) {
  for (std::string_view stat : which) {
    const std::string name = metric + "_" + std::string(stat) + "_" + unit;
    Real(out, name, [get, stat](Record r) {
      const Stats s = get(r);
      if (stat == "mean") return s.getMean();
      if (stat == "median") return s.getMedian();
      if (stat == "std") return s.getStd();
      if (stat == "p90") return s.getP90();
      if (stat == "p95") return s.getP95();
      if (stat == "p99") return s.getP99();
      if (stat == "max") return s.getMax();
      return s.getMin();
    });
  }
}

std::vector<RecordColumn> Build() {
  std::vector<RecordColumn> c;
  // Who measured it, and when.
  c.push_back(
      {"agent_id", "TEXT", [](Result r) -> ColumnValue { return std::string(r.getAgentId()); }});
  c.push_back({"agents", "TEXT", [](Result r) -> ColumnValue {
                 std::string out;
                 for (auto id : r.getAgentIds()) out += (out.empty() ? "" : " ") + std::string(id);
                 return out;
               }});
  c.push_back(
      {"attempt", "INTEGER", [](Result r) -> ColumnValue { return int64_t{r.getAttempt()}; }});
  c.push_back({"result_status", "TEXT", [](Result r) -> ColumnValue {
                 switch (r.getStatus()) {
                   case schema::RunStatus::OK:
                     return std::string("ok");
                   case schema::RunStatus::CANCELLED:
                     return std::string("cancelled");
                   case schema::RunStatus::REFUSED:
                     return std::string("refused");
                   case schema::RunStatus::SKIPPED:
                     return std::string("skipped");
                   default:
                     return std::string("failed");
                 }
               }});
  c.push_back(
      {"result_error", "TEXT", [](Result r) -> ColumnValue { return std::string(r.getError()); }});
  c.push_back({"started_unix_ms", "INTEGER",
               [](Result r) -> ColumnValue { return r.getStartedAtUnixMs(); }});
  c.push_back({"finished_unix_ms", "INTEGER",
               [](Result r) -> ColumnValue { return r.getFinishedAtUnixMs(); }});
  c.push_back({"repeat", "INTEGER",
               [](Result r) -> ColumnValue { return int64_t{r.getSpec().getRepeat()}; }});
  c.push_back({"workload", "TEXT", [](Result r) -> ColumnValue {
                 return std::string(r.getSpec().getWorkload().getName());
               }});

  // Conditions.
  Text(c, "model", [](Record r) { return std::string(r.getModel()); });
  Text(c, "checkpoint_revision", [](Record r) { return std::string(r.getCheckpointRevision()); });
  Text(c, "engine", [](Record r) { return std::string(r.getEngine()); });
  Text(c, "engine_version", [](Record r) { return std::string(r.getEngineVersion()); });
  Text(c, "engine_commit", [](Record r) { return std::string(r.getEngineCommit()); });
  Text(c, "image", [](Record r) { return std::string(r.getImage()); });
  // The engine's own resolution of the settings a comparison matches on (engine check).
  Text(c, "effective_settings", [](Record r) {
    std::string out;
    for (auto s : r.getEffectiveSettings()) {
      const std::string process = s.getProcess();
      out += fmt::format("{}{}{}={}", out.empty() ? "" : "; ",
                         process.empty() || process == "engine" ? "" : process + ":",
                         s.getName().cStr(), s.getValue().cStr());
    }
    return out;
  });
  Text(c, "effective_settings_source",
       [](Record r) { return std::string(r.getEffectiveSettingsSource()); });
  Text(c, "gpu_model", [](Record r) { return std::string(r.getGpuModel()); });
  Int(c, "gpu_count", [](Record r) { return int64_t{r.getGpuCount()}; });
  Text(c, "interconnect", [](Record r) { return std::string(r.getInterconnect()); });
  Text(c, "driver_version", [](Record r) { return std::string(r.getDriverVersion()); });
  Text(c, "cuda_version", [](Record r) { return std::string(r.getCudaVersion()); });
  Text(c, "nccl_version", [](Record r) { return std::string(r.getNcclVersion()); });
  Text(c, "precision", [](Record r) { return std::string(r.getPrecision()); });
  Text(c, "quantization", [](Record r) { return std::string(r.getQuantization()); });
  Text(c, "kv_cache_dtype", [](Record r) { return std::string(r.getKvCacheDtype()); });
  Int(c, "tp", [](Record r) { return int64_t{r.getTp()}; });
  Int(c, "ep", [](Record r) { return int64_t{r.getEp() ? 1 : 0}; });
  Int(c, "pp", [](Record r) { return int64_t{r.getPp()}; });
  Int(c, "dp", [](Record r) { return int64_t{r.getDp()}; });
  Text(c, "pd_split", [](Record r) { return std::string(r.getPdSplit()); });
  Text(c, "input_len_dist", [](Record r) { return std::string(r.getInputLenDist()); });
  Text(c, "output_len_dist", [](Record r) { return std::string(r.getOutputLenDist()); });
  Int(c, "concurrency", [](Record r) { return int64_t{r.getConcurrency()}; });
  Real(c, "request_rate_per_s", [](Record r) { return r.getRequestRatePerS(); });
  Int(c, "max_in_flight", [](Record r) { return int64_t{r.getMaxInFlight()}; });
  Text(c, "arrival", [](Record r) { return std::string(r.getArrival()); });
  Int(c, "warm", [](Record r) { return int64_t{r.getWarm() ? 1 : 0}; });
  Int(c, "warmup_requests", [](Record r) { return int64_t{r.getWarmupRequests()}; });
  Text(c, "simulation", [](Record r) {
    return r.getSimulation().size() > 0 ? std::string(r.getSimulation()) : std::string("none");
  });
  // A simulated figure's standing: which calibration, its error, inside or outside its fit.
  Text(c, "calibration", [](Record r) {
    return r.getCalibration().size() > 0 ? std::string(r.getCalibration()) : std::string("none");
  });
  Real(c, "calibration_error_pct", [](Record r) {
    return r.getCalibration().size() > 0 ? r.getCalibrationErrorPct()
                                         : std::numeric_limits<double>::quiet_NaN();
  });
  Text(c, "calibration_standing", [](Record r) {
    return r.getCalibrationStanding().size() > 0 ? std::string(r.getCalibrationStanding())
                                                 : std::string("none");
  });
  // Its cross-validated band (perfmodel/error_bands.h): NULL when unknown.
  Text(c, "calibration_kind", [](Record r) {
    return r.getCalibrationKind().size() > 0 ? std::string(r.getCalibrationKind())
                                             : std::string("none");
  });
  Real(c, "calibration_band_low_pct", [](Record r) {
    return r.getCalibrationKind().size() > 0 ? r.getCalibrationBandLowPct()
                                             : std::numeric_limits<double>::quiet_NaN();
  });
  Real(c, "calibration_band_high_pct", [](Record r) {
    return r.getCalibrationKind().size() > 0 ? r.getCalibrationBandHighPct()
                                             : std::numeric_limits<double>::quiet_NaN();
  });

  // Figures, computed as `vllm bench serve` does (docs/metrics.md).
  const size_t first_figure = c.size();
  Real(c, "duration_s", [](Record r) { return r.getDurationS(); });
  Int(c, "completed", [](Record r) { return int64_t{r.getCompleted()}; });
  Int(c, "failed", [](Record r) { return int64_t{r.getFailed()}; });
  Real(c, "success_rate", [](Record r) { return r.getSuccessRate(); });
  Int(c, "total_input_tokens",
      [](Record r) { return static_cast<int64_t>(r.getTotalInputTokens()); });
  Int(c, "total_output_tokens",
      [](Record r) { return static_cast<int64_t>(r.getTotalOutputTokens()); });
  Real(c, "request_throughput", [](Record r) { return r.getRequestThroughput(); });
  Real(c, "output_throughput", [](Record r) { return r.getOutputThroughput(); });
  Real(c, "total_token_throughput", [](Record r) { return r.getTotalTokenThroughput(); });
  Real(c, "output_throughput_per_gpu", [](Record r) { return r.getOutputThroughputPerGpu(); });
  Real(c, "goodput", [](Record r) { return r.getGoodput(); });
  StatsColumns(c, "ttft", "ms", [](Record r) { return r.getTtftMs(); },
               {"mean", "median", "std", "p90", "p95", "p99"});
  StatsColumns(c, "tpot", "ms", [](Record r) { return r.getTpotMs(); },
               {"mean", "median", "std", "p90", "p95", "p99"});
  StatsColumns(c, "itl", "ms", [](Record r) { return r.getItlMs(); },
               {"mean", "median", "std", "p90", "p95", "p99"});
  StatsColumns(c, "e2el", "ms", [](Record r) { return r.getE2elMs(); },
               {"mean", "median", "std", "p90", "p95", "p99"});
  StatsColumns(c, "decode", "tok_per_s", [](Record r) { return r.getDecodeTokPerSPerRequest(); },
               {"mean", "median", "min"});
  StatsColumns(c, "prefill", "tok_per_s", [](Record r) { return r.getPrefillTokPerSPerRequest(); },
               {"mean", "median", "min"});
  StatsColumns(c, "ttft_prefix_seen", "ms", [](Record r) { return r.getTtftPrefixSeenMs(); },
               {"mean", "median", "p99"});
  StatsColumns(c, "ttft_prefix_new", "ms", [](Record r) { return r.getTtftPrefixNewMs(); },
               {"mean", "median", "p99"});
  // Hit and miss as the server reported each request's cached prompt tokens.
  StatsColumns(c, "ttft_hit", "ms", [](Record r) { return r.getTtftHitMs(); },
               {"mean", "median", "p99"});
  StatsColumns(c, "ttft_miss", "ms", [](Record r) { return r.getTtftMissMs(); },
               {"mean", "median", "p99"});
  StatsColumns(c, "prefill_hit", "tok_per_s", [](Record r) { return r.getPrefillTokPerSHit(); },
               {"mean", "median"});
  StatsColumns(c, "prefill_miss", "tok_per_s", [](Record r) { return r.getPrefillTokPerSMiss(); },
               {"mean", "median"});
  Real(c, "cold_start_ms", [](Record r) { return r.getColdStartMs(); });
  // The engine the run was measured on (engine_lifecycle), and its prefix cache at the start.
  Text(c, "engine_lifecycle", [](Record r) { return std::string(r.getEngineLifecycle()); });
  Text(c, "engine_id", [](Record r) { return std::string(r.getEngineId()); });
  Int(c, "engine_run_index", [](Record r) { return int64_t{r.getEngineRunIndex()}; });
  Real(c, "engine_age_s", [](Record r) { return r.getEngineAgeS(); });
  Text(c, "cache_state", [](Record r) { return std::string(r.getCacheState()); });
  Real(c, "attempt_s", [](Record r) { return r.getAttemptS(); });
  // Load modes: cancellations at the drain timeout, client queue time, time to first byte, and
  // the steady-state window's aggregate throughputs.
  Int(c, "cancelled", [](Record r) { return int64_t{r.getCancelled()}; });
  StatsColumns(c, "client_queue", "ms", [](Record r) { return r.getClientQueueMs(); },
               {"mean", "median", "p99"});
  StatsColumns(c, "ttfb", "ms", [](Record r) { return r.getTtfbMs(); }, {"mean", "median", "p99"});
  StatsColumns(c, "client_send", "ms", [](Record r) { return r.getClientSendMs(); },
               {"mean", "median", "p99"});
  Real(c, "window_s", [](Record r) { return r.getWindowS(); });
  Real(c, "window_output_throughput", [](Record r) { return r.getWindowOutputThroughput(); });
  Real(c, "window_total_token_throughput",
       [](Record r) { return r.getWindowTotalTokenThroughput(); });
  Text(c, "output_tokens_source", [](Record r) { return std::string(r.getOutputTokensSource()); });

  // The run's certificate (docs/metrics.md#certified-runs): the validity gate, the client-bound
  // verdict and what they were judged on.
  Text(c, "validity", [](Record r) { return std::string(ValidityName(r.getValidity())); });
  Text(c, "validity_reasons", [](Record r) { return std::string(r.getValidityReasons()); });
  Text(c, "reconciliation", [](Record r) { return std::string(r.getReconciliation()); });
  Int(c, "engine_restarts", [](Record r) { return int64_t{r.getEngineRestarts()}; });
  Int(c, "client_bound", [](Record r) { return int64_t{r.getClientBound() ? 1 : 0}; });
  Text(c, "client_bound_reasons", [](Record r) { return std::string(r.getClientBoundReasons()); });
  Real(c, "load_thread_busy_max", [](Record r) { return r.getLoadThreadBusyMax(); });
  Real(c, "read_lag_p99_ms", [](Record r) { return r.getReadLagP99Ms(); });
  Real(c, "send_lateness_p99_ms", [](Record r) { return r.getSendLatenessP99Ms(); });
  Int(c, "reconnects", [](Record r) { return int64_t{r.getReconnects()}; });
  Text(c, "failure_reasons", [](Record r) { return std::string(r.getFailureReasons()); });
  Int(c, "measured_scrapes", [](Record r) { return int64_t{r.getMeasuredScrapes()}; });
  Text(c, "stopped", [](Record r) { return std::string(StopReasonName(r.getStopped())); });
  Text(c, "stop_evidence", [](Record r) { return std::string(r.getStopEvidence()); });
  Real(c, "stopped_at_s", [](Record r) { return r.getStoppedAtS(); });

  // Engine signals scraped from /metrics during the measured phase.
  Real(c, "kv_cache_usage_max", [](Record r) { return r.getKvCacheUsageMax(); });
  Real(c, "running_max", [](Record r) { return r.getRunningMax(); });
  Real(c, "waiting_max", [](Record r) { return r.getWaitingMax(); });
  Real(c, "preemptions", [](Record r) { return r.getPreemptions(); });
  Real(c, "prefix_cache_hits", [](Record r) { return r.getPrefixCacheHits(); });
  Real(c, "prefix_cache_queries", [](Record r) { return r.getPrefixCacheQueries(); });
  // A set prefix hit rate (workload prefix_hit_rate) and the engine's over the measured phase.
  Real(c, "prefix_hit_rate_target", [](Record r) { return r.getPrefixHitRateTarget(); });
  Real(c, "prefix_hit_rate", [](Record r) { return r.getPrefixHitRate(); });
  Real(c, "spec_decode_acceptance", [](Record r) { return r.getSpecDecodeAcceptance(); });

  // GPU telemetry (nvidia-smi every second) during the measured phase.
  Text(c, "gpu_telemetry", [](Record r) { return std::string(r.getGpuTelemetry()); });
  Real(c, "gpu_util_mean_pct", [](Record r) { return r.getGpuUtilMeanPct(); });
  Real(c, "gpu_memory_used_max_mib", [](Record r) { return r.getGpuMemoryUsedMaxMib(); });
  Real(c, "gpu_power_mean_w", [](Record r) { return r.getGpuPowerMeanW(); });
  Real(c, "gpu_sm_clock_mean_mhz", [](Record r) { return r.getGpuSmClockMeanMhz(); });

  // Energy over the measured phase (record/run_energy.h): counters, or power samples.
  Text(c, "energy_source", [](Record r) { return std::string(r.getEnergySource()); });
  Int(c, "energy_valid", [](Record r) { return int64_t{r.getEnergyValid() ? 1 : 0}; });
  Text(c, "energy_invalid_reason",
       [](Record r) { return std::string(r.getEnergyInvalidReason()); });
  Real(c, "energy_j", [](Record r) { return r.getEnergyJ(); });
  Real(c, "energy_window_s", [](Record r) { return r.getEnergyWindowS(); });
  Real(c, "energy_per_request_j", [](Record r) { return r.getEnergyPerRequestJ(); });
  Real(c, "energy_per_output_tok_j", [](Record r) { return r.getEnergyPerOutputTokJ(); });
  Real(c, "energy_per_total_tok_j", [](Record r) { return r.getEnergyPerTotalTokJ(); });
  Real(c, "energy_prefill_j", [](Record r) { return r.getEnergyPrefillJ(); });
  Real(c, "energy_decode_j", [](Record r) { return r.getEnergyDecodeJ(); });
  Real(c, "energy_prefill_per_input_tok_j",
       [](Record r) { return r.getEnergyPrefillPerInputTokJ(); });
  Real(c, "energy_decode_per_output_tok_j",
       [](Record r) { return r.getEnergyDecodePerOutputTokJ(); });

  // Cost (engine_config.price; results/cost_model.h): the measured window at the GPU price
  // per hour, or the successful requests' tokens at the token prices. NaN without a price.
  auto cost_of = [](Result r) {
    const auto record = r.getRecord();
    CostInputs in;
    in.gpu_count = record.getGpuCount();
    in.duration_s = record.getDurationS();
    in.completed = record.getCompleted();
    in.input_tok = static_cast<double>(record.getTotalInputTokens());
    in.output_tok = static_cast<double>(record.getTotalOutputTokens());
    in.cached_input_tok = record.getPrefixCacheHits();
    return CostOf(PriceOf(r.getSpec().getEngineConfig()), in);
  };
  c.push_back({"cost_per_completed_request", "REAL",
               [cost_of](Result r) -> ColumnValue {
                 const Cost cost = cost_of(r);
                 return cost.priced ? cost.per_request : std::numeric_limits<double>::quiet_NaN();
               },
               false, true});
  c.push_back({"cost_per_mtok_output", "REAL",
               [cost_of](Result r) -> ColumnValue {
                 const Cost cost = cost_of(r);
                 return cost.priced ? cost.per_mtok_output
                                    : std::numeric_limits<double>::quiet_NaN();
               },
               false, true});
  c.push_back({"cost_currency", "TEXT",
               [](Result r) -> ColumnValue {
                 return std::string(r.getSpec().getEngineConfig().getCurrency());
               },
               false, true});

  // The quality gate (docs/quality.md): tasks answered after the measured phase.
  Text(c, "quality_task_set", [](Record r) {
    return r.getQualityTaskSet().size() > 0 ? std::string(r.getQualityTaskSet())
                                            : std::string("n/a: no quality task set");
  });
  Int(c, "quality_tasks", [](Record r) { return int64_t{r.getQualityTasks()}; });
  Int(c, "quality_correct", [](Record r) { return int64_t{r.getQualityCorrect()}; });
  Real(c, "quality_accuracy", [](Record r) {
    return r.getQualityTasks() > 0 ? r.getQualityAccuracy()
                                   : std::numeric_limits<double>::quiet_NaN();
  });
  for (size_t i = first_figure; i < c.size(); ++i) c[i].figure = true;
  return c;
}

}  // namespace

const std::vector<RecordColumn>& RecordColumns() {
  static const std::vector<RecordColumn> columns = Build();
  return columns;
}

std::string_view ValidityName(schema::Validity validity) {
  switch (validity) {
    case schema::Validity::NOT_JUDGED:
      return "";
    case schema::Validity::VALID:
      return "valid";
    case schema::Validity::INVALID:
      return "invalid";
    case schema::Validity::NOT_RECONCILED:
      return "not reconciled";
  }
  return "";
}

std::string_view StopReasonName(schema::StopReason reason) {
  switch (reason) {
    case schema::StopReason::NONE:
      return "";
    case schema::StopReason::STABLE:
      return "stable";
    case schema::StopReason::OVERSATURATED:
      return "oversaturated";
    case schema::StopReason::MAX_DURATION:
      return "max_duration";
  }
  return "";
}

Status ParseValidity(std::string_view name, schema::Validity* out) {
  for (const auto v : {schema::Validity::NOT_JUDGED, schema::Validity::VALID,
                       schema::Validity::INVALID, schema::Validity::NOT_RECONCILED}) {
    if (ValidityName(v) == name) {
      *out = v;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument(fmt::format(
      "validity: expected \"\", \"valid\", \"invalid\" or \"not reconciled\", found \"{}\"", name));
}

bool IsEnergyColumn(std::string_view column) {
  return column.starts_with("energy_") && column != "energy_valid";
}

bool EnergyValid(const std::map<std::string, double>& figures) {
  const auto valid = figures.find("energy_valid");
  return valid != figures.end() && valid->second == 1;
}

}  // namespace servesweep::results
