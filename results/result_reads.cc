#include "results/result_reads.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "common/unknown_key.h"
#include "results/record_columns.h"

namespace servesweep::results {
namespace {

double ToDouble(const std::string& cell) { return std::strtod(cell.c_str(), nullptr); }
int64_t ToInt(const std::string& cell) { return std::strtoll(cell.c_str(), nullptr, 10); }

}  // namespace

Status LoadUncertifiedRuns(ResultsStore& store, std::vector<UncertifiedRun>* out) {
  Table t;
  if (Status s = store.Query(
          "SELECT r.label, s.completed, s.failed, s.validity, s.validity_reasons, "
          "s.client_bound, s.client_bound_reasons, s.failure_reasons FROM results s JOIN "
          "runs r USING(run_id) WHERE s.result_status = 'ok' AND (s.validity = 'invalid' "
          "OR s.client_bound = 1 OR (s.completed = 0 AND s.failed > 0)) ORDER BY r.idx",
          &t);
      !s.ok()) {
    return s;
  }
  out->clear();
  for (const auto& row : t.rows) {
    UncertifiedRun run;
    run.label = row[0];
    run.completed = ToInt(row[1]);
    run.failed = ToInt(row[2]);
    if (Status s = ParseValidity(row[3], &run.validity); !s.ok()) {
      return s.Prefixed("results.db, run " + run.label);
    }
    run.validity_reasons = row[4];
    run.client_bound = row[5] == "1";
    run.client_bound_reasons = row[6];
    run.failure_reasons = row[7];
    out->push_back(std::move(run));
  }
  return Status::Ok();
}

Status LoadNodeProbes(ResultsStore& store, std::vector<NodeProbeReport>* reports,
                      std::vector<FlaggedProbe>* flagged) {
  Table r, f;
  if (Status s = store.Query(
          "SELECT agent_id, gpu_model, status, healthy, excluded FROM node_probe_reports "
          "ORDER BY agent_id",
          &r);
      !s.ok()) {
    return s;
  }
  if (Status s =
          store.Query("SELECT agent_id, reason FROM node_probes WHERE verdict NOT IN ('ok', '') "
                      "ORDER BY agent_id, name, gpu",
                      &f);
      !s.ok()) {
    return s;
  }
  reports->clear();
  for (const auto& row : r.rows) {
    reports->push_back({row[0], row[1], row[2], row[3] == "1", row[4] == "1"});
  }
  flagged->clear();
  for (const auto& row : f.rows) flagged->push_back({row[0], row[1]});
  return Status::Ok();
}

Status LoadSweepMeta(ResultsStore& store, std::map<std::string, std::string>* out) {
  Table t;
  if (Status s = store.Query("SELECT key, value FROM meta WHERE key != 'matrix_text'", &t);
      !s.ok()) {
    return s;
  }
  out->clear();
  for (const auto& row : t.rows) (*out)[row[0]] = row[1];
  return Status::Ok();
}

Status LoadSimulationKind(ResultsStore& store, std::string* out) {
  Table t;
  if (Status s = store.Query(
          "SELECT simulation FROM results WHERE simulation IS NOT NULL AND simulation != 'none' "
          "LIMIT 1",
          &t);
      !s.ok()) {
    return s;
  }
  *out = t.rows.empty() ? "" : t.rows[0][0];
  return Status::Ok();
}

Status LoadSweepGpuSpan(ResultsStore& store, SweepGpuSpan* out) {
  Table t;
  if (Status s = store.Query(
          "SELECT (SELECT IFNULL(SUM(MAX(gpus, emulated_gpus)), 0) FROM agents), "
          "IFNULL((MAX(finished_unix_ms) - MIN(started_unix_ms)) / 1000.0, 0) FROM results "
          "WHERE started_unix_ms > 0 AND finished_unix_ms > 0",
          &t);
      !s.ok()) {
    return s;
  }
  *out = SweepGpuSpan();
  if (t.rows.empty()) return Status::Ok();
  out->agent_gpus = ToDouble(t.rows[0][0]);
  out->span_s = std::max(0.0, ToDouble(t.rows[0][1]));
  return Status::Ok();
}

Status LoadGpuModels(ResultsStore& store, std::map<std::string, std::string>* out) {
  Table t;
  if (Status s = store.Query("SELECT run_id, gpu_model FROM results", &t); !s.ok()) return s;
  out->clear();
  for (const auto& row : t.rows) (*out)[row[0]] = row[1];
  return Status::Ok();
}

Status LoadPlottedSignals(ResultsStore& store, std::vector<EngineSample>* out) {
  Table t;
  if (Status s = store.Query(
          "SELECT run_id, at_ns, name, value FROM engine_samples WHERE name IN "
          "('kv_cache_usage', 'running', 'waiting', 'preemptions') AND value IS NOT NULL "
          "ORDER BY run_id, at_ns",
          &t);
      !s.ok()) {
    return s;
  }
  out->clear();
  for (const auto& row : t.rows) {
    out->push_back({row[0], static_cast<int64_t>(ToDouble(row[1])), row[2], ToDouble(row[3])});
  }
  return Status::Ok();
}

Status LoadAdapterFigures(ResultsStore& store, std::vector<AdapterFigures>* out) {
  Table t;
  if (Status s = store.Query(
          "SELECT r.label, a.adapter, a.requests, a.completed, a.output_throughput, "
          "a.ttft_mean_ms, a.ttft_p90_ms, a.tpot_mean_ms, a.tpot_p90_ms FROM adapter_figures a "
          "JOIN runs r USING(run_id) ORDER BY r.idx, a.adapter",
          &t);
      !s.ok()) {
    return s;
  }
  out->clear();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& row = t.rows[i];
    auto real = [&](size_t c) { return t.is_null[i][c] ? nan : ToDouble(row[c]); };
    out->push_back({row[0], row[1], ToInt(row[2]), ToInt(row[3]), real(4), real(5), real(6),
                    real(7), real(8)});
  }
  return Status::Ok();
}

Status LoadRequestTtfts(ResultsStore& store, std::vector<RequestTtft>* out) {
  Table t;
  if (Status s =
          store.Query("SELECT run_id, prompt_tokens, (first_token_ns - "
                      "CASE WHEN sent_ns >= 0 THEN sent_ns ELSE start_ns END) / 1e6, start_ns "
                      "FROM requests WHERE success = 1 ORDER BY run_id, idx",
                      &t);
      !s.ok()) {
    return s;
  }
  out->clear();
  for (const auto& row : t.rows) {
    out->push_back({row[0], ToDouble(row[1]), ToDouble(row[2]), ToInt(row[3])});
  }
  return Status::Ok();
}

Status LoadOkResultFigures(ResultsStore& store, const std::vector<std::string>& columns,
                           std::map<std::string, ResultFigures>* by_run_id) {
  std::vector<std::string> known;
  for (const auto& c : RecordColumns()) known.push_back(c.name);
  std::string select = "run_id, simulation";
  for (const auto& c : columns) {
    if (std::find(known.begin(), known.end(), c) == known.end()) {
      return Status::InvalidArgument(UnknownKeyMessage(c, "the record's columns", known));
    }
    select += fmt::format(", \"{}\"", c);
  }
  Table t;
  if (Status s =
          store.Query(fmt::format("SELECT {} FROM results WHERE result_status = 'ok'", select), &t);
      !s.ok()) {
    return s;
  }
  by_run_id->clear();
  for (size_t r = 0; r < t.rows.size(); ++r) {
    ResultFigures figures;
    figures.simulation = t.rows[r][1];
    for (size_t c = 0; c < columns.size(); ++c) {
      figures.values.push_back(
          t.is_null[r][c + 2] ? std::nullopt : std::optional<double>(ToDouble(t.rows[r][c + 2])));
    }
    (*by_run_id)[t.rows[r][0]] = std::move(figures);
  }
  return Status::Ok();
}

}  // namespace servesweep::results
