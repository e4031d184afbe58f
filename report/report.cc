#include "report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "report/comparison.h"
#include "report/report_data.h"
#include "report/report_html.h"
#include "results/record_columns.h"
#include "results/result_reads.h"

namespace servesweep::report {
namespace {

// Cells of one summary row by column name; NULL reads "n/a" (the record is never silently blank).
class Row {
 public:
  Row(const results::Table& table, size_t row) : table_(table), row_(row) {
    for (size_t i = 0; i < table.columns.size(); ++i) index_[table.columns[i]] = i;
  }
  bool Null(const std::string& column) const { return table_.is_null[row_][index_.at(column)]; }
  std::string Text(const std::string& column) const {
    return Null(column) ? "n/a" : table_.rows[row_][index_.at(column)];
  }
  // The validity verdict of the row's run. A name that is none of the verdicts' was refused when
  // the report's runs were loaded (LoadComparedRuns), so it cannot reach here.
  schema::Validity Validity() const {
    schema::Validity v = schema::Validity::NOT_JUDGED;
    if (!Null("validity")) results::ParseValidity(Text("validity"), &v).IgnoreError();
    return v;
  }
  double Real(const std::string& column) const {
    return std::strtod(table_.rows[row_][index_.at(column)].c_str(), nullptr);
  }
  std::string Number(const std::string& column, int decimals) const {
    if (Null(column)) return "n/a";
    return fmt::format(
        "{:.{}f}", std::strtod(table_.rows[row_][index_.at(column)].c_str(), nullptr), decimals);
  }

 private:
  const results::Table& table_;
  size_t row_;
  std::map<std::string, size_t> index_;
};

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::Internal(fmt::format("{}: cannot write", path));
  return Status::Ok();
}

std::string SummaryCsv(const results::Table& table) {
  std::string csv;
  for (size_t i = 0; i < table.columns.size(); ++i) {
    csv += (i ? "," : "") + CsvField(table.columns[i]);
  }
  csv += "\n";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    for (size_t i = 0; i < table.columns.size(); ++i) {
      csv += (i ? "," : "") + CsvField(table.is_null[r][i] ? "n/a" : table.rows[r][i]);
    }
    csv += "\n";
  }
  return csv;
}

// The agents' pre-flight probes: one line per agent, then every figure that was flagged.
std::string NodeProbesMarkdown(results::ResultsStore& store) {
  std::vector<results::NodeProbeReport> reports;
  std::vector<results::FlaggedProbe> flagged;
  if (Status s = results::LoadNodeProbes(store, &reports, &flagged); !s.ok()) {
    return fmt::format("\n## Node probes\n\nNot read: {}\n", s.message());
  }
  if (reports.empty()) return "";
  std::string md =
      "\n## Node probes\n\n| agent | GPU | probes | healthy | in the sweep "
      "|\n|---|---|---|---|---|\n";
  for (const auto& r : reports) {
    md += fmt::format("| {} | {} | {} | {} | {} |\n", r.agent_id, r.gpu_model, r.status,
                      r.healthy ? "yes" : "**no**", r.excluded ? "**left out**" : "yes");
  }
  for (const auto& f : flagged) md += fmt::format("- {}: {}\n", f.agent_id, f.reason);
  return md;
}

// A run's certificate in the runs table ("-" without a result).
std::string CertificateText(const Row& row) {
  const schema::Validity validity = row.Validity();
  if (validity == schema::Validity::NOT_JUDGED) return "-";
  std::string out(results::ValidityName(validity));
  if (validity == schema::Validity::INVALID) out = "**invalid**";
  if (row.Text("client_bound") == "1") out += ", **client-bound**";
  return out;
}

// How the run's engine started: "cold, 6002 ms" (the run started it), "warm #2, reset" (a later
// run on a kept engine, and its prefix cache); "-" without a result.
std::string EngineStartText(const Row& row) {
  if (row.Null("engine_run_index") || row.Text("engine_run_index") == "0") {
    return row.Null("cold_start_ms") ? "-" : "cold, " + row.Number("cold_start_ms", 0) + " ms";
  }
  return fmt::format("warm #{}, {}", row.Text("engine_run_index"), row.Text("cache_state"));
}

// The GPU time the measured runs held, by phase: starting engines (each engine's cold start,
// on the run that started it), measuring (the measured phases), and the rest of each run
// (resets, warm-up, quality tasks, draining); and the agents' GPUs idle in the sweep's span
// (between runs, or with no run to take). "" without a run that reports its time.
std::string GpuTimeMarkdown(const results::Table& summary, const results::SweepGpuSpan& span) {
  double starting_s = 0, measuring_s = 0, held_s = 0;
  size_t runs = 0, starts = 0;
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const Row row(summary, r);
    if (row.Null("attempt_s") || row.Null("gpu_count")) continue;
    const double gpus = row.Real("gpu_count");
    ++runs;
    held_s += gpus * row.Real("attempt_s");
    if (!row.Null("duration_s")) measuring_s += gpus * row.Real("duration_s");
    const bool started = row.Null("engine_run_index") || row.Text("engine_run_index") == "0";
    if (started && !row.Null("cold_start_ms")) {
      starting_s += gpus * row.Real("cold_start_ms") / 1e3;
      ++starts;
    }
  }
  if (runs == 0) return "";
  const double other_s = std::max(0.0, held_s - starting_s - measuring_s);
  std::string md = fmt::format(
      "\n## GPU time\n\n{} run(s) held {:.3f} GPU-hours: starting engines {:.3f} ({} engine "
      "start(s)), measuring {:.3f}, the rest {:.3f} (cache resets, warm-up, quality tasks, "
      "draining).",
      runs, held_s / 3600, starting_s / 3600, starts, measuring_s / 3600, other_s / 3600);
  const double available_s = span.agent_gpus * span.span_s;
  if (available_s > 0) {
    md += fmt::format(
        " The agents' {:g} GPU(s) over the sweep's {:.0f} s were idle {:.3f} GPU-hours more "
        "(between runs, or with no run to take; docs/matrix.md#engine-lifecycle).",
        span.agent_gpus, span.span_s, std::max(0.0, available_s - held_s) / 3600);
  }
  return md + "\n";
}

// The runs that ended their measured phase early, with the evidence, and the levels skipped
// above an over-saturated one (docs/matrix.md#early-stop). "" when there are none.
std::string EarlyStopsMarkdown(const results::Table& summary) {
  std::string stopped, skipped;
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const Row row(summary, r);
    if (row.Text("status") == "skipped") {
      skipped += fmt::format("- {}: {}\n", row.Text("label"), row.Text("last_error"));
    } else if (!row.Null("stopped") && !row.Text("stopped").empty()) {
      stopped += fmt::format("- {}: stopped: {} after {} s measured: {}\n", row.Text("label"),
                             row.Text("stopped"), row.Number("stopped_at_s", 1),
                             row.Text("stop_evidence"));
    }
  }
  if (stopped.empty() && skipped.empty()) return "";
  std::string md =
      "\n## Early stops\n\nRuns whose measured phase ended before its full length "
      "(`early_stop`): their figures cover the requests measured until then. A run stopped "
      "`oversaturated` measured a queue that kept growing: its latencies depend on how long it "
      "ran, and the levels above it were skipped.\n\n";
  md += stopped;
  if (!skipped.empty()) md += "\nSkipped, never run (no GPU time spent):\n\n" + skipped;
  return md;
}

// Joules per token beside tokens per GPU, for the runs whose GPUs' energy was read
// (docs/results.md#energy); an invalid figure is shown with why.
std::string EnergyMarkdown(const results::Table& summary) {
  std::string rows;
  auto real = [](const Row& row, const std::string& column) {
    return row.Null(column) ? std::string("n/a") : fmt::format("{:.4g}", row.Real(column));
  };
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const Row row(summary, r);
    if (row.Null("energy_source") || row.Text("energy_source").rfind("n/a", 0) == 0) continue;
    rows += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", row.Text("label"),
                        row.Number("output_throughput_per_gpu", 1),
                        real(row, "energy_per_output_tok_j"), real(row, "energy_per_total_tok_j"),
                        real(row, "energy_per_request_j"), real(row, "energy_j"),
                        row.Text("energy_valid") == "1"
                            ? std::string("valid")
                            : "**invalid**: " + row.Text("energy_invalid_reason"));
  }
  if (rows.empty()) return "";
  return "\n## Energy\n\nThe run's GPUs over its measured phase, from their energy counters "
         "(or power samples where a GPU has none): docs/results.md#energy.\n\n"
         "| run | out tok/s/GPU | J/out tok | J/tok (in+out) | J/request | J | energy |\n"
         "|---|---|---|---|---|---|---|\n" +
         rows;
}

// A multi-LoRA run's figures per adapter (docs/metrics.md#per-adapter). "" without such runs.
std::string AdaptersMarkdown(results::ResultsStore& store) {
  std::vector<results::AdapterFigures> adapters;
  if (Status s = results::LoadAdapterFigures(store, &adapters); !s.ok()) {
    return fmt::format("\n## Per adapter\n\nNot read: {}\n", s.message());
  }
  if (adapters.empty()) return "";
  auto figure = [](double v, int decimals) {
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : std::string("n/a");
  };
  std::string md =
      "\n## Per adapter\n\nMulti-LoRA runs over the measured requests that named each adapter "
      "(the base model as `(base)`); an adapter's out tok/s is its tokens over the run's "
      "duration, so a run's adapters add up to the run (docs/metrics.md#per-adapter).\n\n"
      "| run | adapter | requests | completed | out tok/s | TTFT mean | TTFT p90 | TPOT mean | "
      "TPOT p90 |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& a : adapters) {
    md +=
        fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", a.label,
                    a.adapter.empty() ? "(base)" : a.adapter, a.requests, a.completed,
                    figure(a.output_tok_per_s, 1), figure(a.ttft_mean_ms, 1),
                    figure(a.ttft_p90_ms, 1), figure(a.tpot_mean_ms, 2), figure(a.tpot_p90_ms, 2));
  }
  return md;
}

// Why each run is not plainly valid, and why its requests failed (docs/metrics.md).
std::string CertificatesMarkdown(const results::Table& summary) {
  std::string lines, reasons;
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const Row row(summary, r);
    if (row.Null("validity")) continue;
    const std::string label = row.Text("label");
    const schema::Validity validity = row.Validity();
    if (validity != schema::Validity::VALID && validity != schema::Validity::NOT_JUDGED) {
      lines += fmt::format("- {}: {}: {}\n", label, results::ValidityName(validity),
                           row.Text("validity_reasons"));
    }
    if (row.Text("client_bound") == "1") {
      lines += fmt::format("- {}: client-bound: {}\n", label, row.Text("client_bound_reasons"));
    }
    if (!row.Null("failure_reasons") && !row.Text("failure_reasons").empty()) {
      reasons += fmt::format("- {}: {}\n", label, row.Text("failure_reasons"));
    }
  }
  std::string md;
  if (!lines.empty()) {
    md +=
        "\n## Certificates\n\nRuns that are not plainly valid. Invalid and client-bound runs "
        "stay listed here and in summary.csv but are left out of curves, knees, best SLO "
        "points, Pareto frontiers, the diagnosis and comparison groups (`servesweep report "
        "--include-invalid` uses them).\n\n" +
        lines;
  }
  if (!reasons.empty()) md += "\n## Failure reasons\n\nMost frequent first.\n\n" + reasons;
  return md;
}

std::string Figure(double value, int decimals) {
  return std::isfinite(value) ? fmt::format("{:.{}f}", value, decimals) : std::string("n/a");
}

// Knee and best SLO point per configuration (docs/report.md#curves).
std::string CurvesMarkdown(const ReportData& data) {
  if (data.curves.empty()) return "";
  std::string md =
      "\n## Curves: knee and best SLO point\n\nPer configuration, over its load levels (medians "
      "of the ok repeats). Knee: the lowest level after which no higher level gains more than "
      "10% output throughput per doubling. Best SLO point: the highest-throughput level whose "
      "every repeat had >= 90% of its requests within every SLO limit. Pareto frontier: levels "
      "not beaten on both output tokens/s per GPU and tokens/s per user (1000 / median TPOT). "
      "Definitions: docs/report.md.\n\n"
      "| configuration | levels | peak out tok/s/GPU | knee | best SLO point | Pareto frontier "
      "|\n|---|---|---|---|---|---|\n";
  for (const ConfigCurve& c : data.curves) {
    std::string levels, frontier;
    double peak = std::nan("");
    for (const auto& p : c.curve.points) {
      levels += (levels.empty() ? "" : ", ") + fmt::format("{:g}", p.level);
      const double v = p.Median("output_throughput_per_gpu");
      if (std::isfinite(v) && !(v <= peak)) peak = v;
    }
    std::vector<size_t> on_frontier = c.frontier;
    std::sort(on_frontier.begin(), on_frontier.end());  // ascending level
    for (size_t i : on_frontier) {
      frontier += (frontier.empty() ? "" : ", ") + fmt::format("{:g}", c.curve.points[i].level);
    }
    const std::string knee =
        c.knee.found ? fmt::format("{:g} ({:.1f} tok/s)", c.knee.level, c.knee.throughput)
                     : "none: " + c.knee.reason;
    const std::string slo = c.slo.found
                                ? fmt::format("{:g} ({:.1f} tok/s)", c.slo.level, c.slo.throughput)
                                : "none: " + c.slo.reason;
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", c.curve.config, levels, Figure(peak, 1),
                      knee, slo, frontier.empty() ? "n/a" : frontier);
  }
  return md;
}

// Cost of every priced ok run (docs/report.md#cost).
std::string CostMarkdown(const ReportData& data) {
  std::string rows;
  for (const ReportRun& r : data.runs) {
    if (!r.cost.priced) continue;
    rows +=
        fmt::format("| {} | {} | {} | {} | {} | {} |\n", r.run.label,
                    r.currency.empty() ? "-" : r.currency, Figure(r.cost.total, 4),
                    Figure(r.cost.per_mtok_output, 4), Figure(r.cost.per_request, 6), r.cost.basis);
  }
  std::string md = "\n## Cost\n\n";
  if (rows.empty()) {
    return md +
           "No run is priced: add `engine_config.price` (a GPU per hour, or a managed API's "
           "token prices) to the matrix (docs/report.md#cost).\n";
  }
  return md +
         "The measured window's cost: GPUs x duration at the GPU-hour price, or the successful "
         "requests' tokens at the token prices (docs/report.md#cost).\n\n"
         "| run | currency | cost | per million output tokens | per successful request | basis "
         "|\n|---|---|---|---|---|---|\n" +
         rows;
}

// Diagnosis findings (docs/report.md#diagnosis).
std::string DiagnosisMarkdown(const ReportData& data) {
  std::string md =
      "\n## Diagnosis\n\nRules applied to the measured signals (thresholds: "
      "docs/report.md#diagnosis).\n\n";
  bool concurrency_one = false;
  for (const ConfigCurve& c : data.curves) {
    concurrency_one = concurrency_one || (!data.open_loop && c.curve.points.front().level == 1);
  }
  if (!concurrency_one) {
    md += "Decode speed at concurrency 1 not judged: no configuration ran at concurrency 1.\n\n";
  }
  if (data.findings.empty()) return md + "No rule fired.\n";
  for (const Finding& f : data.findings) {
    md += fmt::format("- **{}** ({}): {}. Look at: {}.\n", f.rule, f.subject, f.evidence, f.causes);
  }
  return md;
}

std::string ReportMarkdown(results::ResultsStore& store, const results::Table& summary,
                           const ReportData& data) {
  std::map<std::string, std::string> info;
  if (Status s = results::LoadSweepMeta(store, &info); !s.ok()) {
    info["sweep_name"] = "(meta not read: " + s.message() + ")";
  }
  size_t done = 0, failed = 0, skipped = 0, other = 0;
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const std::string status = Row(summary, r).Text("status");
    (status == "done"      ? done
     : status == "failed"  ? failed
     : status == "skipped" ? skipped
                           : other)++;
  }
  std::string md = fmt::format("# servesweep report: {}\n\n", info["sweep_name"]);
  md += fmt::format("Matrix `{}` (hash {}), servesweep {}.\n\n", info["matrix_path"],
                    info["matrix_hash"], info["servesweep_version"]);
  md += fmt::format(
      "{} runs: {} done, {} failed, {}{} not finished.\n\n", summary.rows.size(), done, failed,
      skipped > 0 ? fmt::format("{} skipped (a lower load level over-saturated), ", skipped) : "",
      other);
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const std::string simulation = Row(summary, r).Text("simulation");
    if (simulation != "none" && simulation != "n/a") {
      md += fmt::format(
          "**SIMULATED**: these figures come from the performance model ({}; docs/perfmodel.md), "
          "not from an engine. What each run's figures stand on (engine profile, its error, "
          "whether the run lies inside what it was fitted on):\n\n",
          simulation);
      // Per run: an extrapolated or uncalibrated figure must not read as a calibrated one.
      for (size_t k = 0; k < summary.rows.size(); ++k) {
        const Row row(summary, k);
        if (row.Text("simulation") == "none" || row.Text("simulation") == "n/a") continue;
        const std::string standing = row.Text("calibration_standing");
        const bool fitted = standing == "calibrated";
        const bool uncalibrated = standing.rfind("uncalibrated", 0) == 0;
        const bool band_known =
            !row.Null("calibration_band_low_pct") && !row.Null("calibration_band_high_pct");
        md += fmt::format(
            "- {}: {}, {} {}%; {}; {}: {}\n", row.Text("label"), row.Text("calibration"),
            fitted         ? "fit error"
            : uncalibrated ? "typical error"
                           : "expected error at least",
            row.Number("calibration_error_pct", 0), standing, row.Text("calibration_kind"),
            band_known
                ? fmt::format("80% of cross-validated figures like it within {:+.0f}% / {:+.0f}%",
                              row.Real("calibration_band_low_pct"),
                              row.Real("calibration_band_high_pct"))
                : std::string("cross-validated error unknown (too few cases of this kind)"));
      }
      md += "\n";
      break;
    }
  }
  md +=
      "Figures over the measured requests (warm-up excluded), computed as `vllm bench serve` "
      "does; definitions in docs/metrics.md. Throughput in tokens/s, latencies in ms; rate \"-\" "
      "is closed loop; accuracy \"-\" means no quality task set (docs/quality.md).\n\n";
  md +=
      "Certificate: `valid` (the engine's counters agree with the client's), `not reconciled` "
      "(the engine exposes no counter to check), **invalid** or **client-bound** (see below: "
      "left out of curves, knees, frontiers and comparisons unless `--include-invalid`); "
      "docs/metrics.md#certified-runs.\n\n";
  md +=
      "Engine start: `cold` with its cold start (the run started its engine), or `warm #n` (the "
      "n-th later run on an engine kept for its configuration) with the prefix cache it began "
      "from; docs/matrix.md#engine-lifecycle.\n\n";
  md +=
      "| run | status | certificate | engine | GPUs | tp/pp/dp | conc. | rate | ok/failed | req/s "
      "| out tok/s | out tok/s/GPU | accuracy | TTFT p50 | TTFT p99 | TPOT p50 | ITL p50 | E2E p50 "
      "| E2E p95 | engine start |\n";
  md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const Row row(summary, r);
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {}/{}/{} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} "
        "| {} | {} | {} | {} |\n",
        row.Text("label"), row.Text("status"), CertificateText(row), row.Text("engine"),
        row.Text("gpu_count"), row.Text("tp"), row.Text("pp"), row.Text("dp"),
        // An open loop has no slots: at most its cap on requests in flight.
        row.Text("max_in_flight") != "0" ? "max " + row.Text("max_in_flight")
        : row.Text("concurrency") != "0" ? row.Text("concurrency")
                                         : std::string("-"),
        row.Text("arrival") == "closed-loop" ? std::string("-")
                                             : row.Number("request_rate_per_s", 1),
        row.Text("completed"), row.Text("failed"), row.Number("request_throughput", 2),
        row.Number("output_throughput", 1), row.Number("output_throughput_per_gpu", 1),
        row.Null("quality_accuracy")
            ? std::string("-")
            : fmt::format("{} ({}/{})", row.Number("quality_accuracy", 2),
                          row.Text("quality_correct"), row.Text("quality_tasks")),
        row.Number("ttft_median_ms", 1), row.Number("ttft_p99_ms", 1),
        row.Number("tpot_median_ms", 2), row.Number("itl_median_ms", 2),
        row.Number("e2el_median_ms", 1), row.Number("e2el_p95_ms", 1), EngineStartText(row));
  }
  std::string failures;
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const Row row(summary, r);
    if (row.Text("status") == "done" || row.Text("status") == "skipped") continue;  // Early stops
    failures += fmt::format("- `{}` [{}]: {} after {} attempt(s): {}\n", row.Text("run_id"),
                            row.Text("label"), row.Text("status"), row.Text("attempts"),
                            row.Text("last_error"));
  }
  if (!failures.empty()) md += "\n## Runs not done\n\n" + failures;
  md += CertificatesMarkdown(summary);
  md += EarlyStopsMarkdown(summary);
  md += EnergyMarkdown(summary);
  md += AdaptersMarkdown(store);
  results::SweepGpuSpan span;
  if (Status s = results::LoadSweepGpuSpan(store, &span); !s.ok()) span = {};
  md += GpuTimeMarkdown(summary, span);
  md += CurvesMarkdown(data);
  md += CostMarkdown(data);
  md += DiagnosisMarkdown(data);
  md += RenderGroupComparisons(data.compared, data.selection);
  md += NodeProbesMarkdown(store);
  md += "\nEvery column of every run: summary.csv (docs/results.md). Raw data: results.db.\n";
  return md;
}

}  // namespace

std::string CsvField(const std::string& value) {
  if (value.find_first_of(",\"\n\r") == std::string::npos) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

Status WriteReports(results::ResultsStore& store, const std::string& out_dir, ReportPaths* paths,
                    const RunSelection& selection) {
  results::Table summary;
  if (Status s = store.QuerySummary(&summary); !s.ok()) return s;
  paths->summary_csv = out_dir + "/summary.csv";
  paths->report_md = out_dir + "/report.md";
  paths->report_html = out_dir + "/report.html";
  if (Status s = WriteFile(paths->summary_csv, SummaryCsv(summary)); !s.ok()) return s;
  ReportData data;
  if (Status s = LoadReportData(store, &data, selection); !s.ok()) return s;
  const std::string md = ReportMarkdown(store, summary, data);
  if (Status s = WriteFile(paths->report_md, md); !s.ok()) return s;
  // The page's title is the report's first line; the rest is shared with report.md.
  const size_t title_end = md.find('\n');
  const std::string title = md.substr(2, title_end - 2);
  return WriteFile(paths->report_html, ReportHtml(data, title, md.substr(title_end + 1)));
}

}  // namespace servesweep::report
