#include "cli/sweep_driver.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "common/clock.h"
#include "coordinator/progress_display.h"
#include "report/report.h"
#include "results/result_reads.h"

namespace servesweep::cli {
namespace {

// The runs a user must look at first, one line each, at the end of the sweep's output: every
// request failed, invalid, client-bound (their reasons are in report.md too).
void PrintUncertifiedRuns(results::ResultsStore& store) {
  std::vector<results::UncertifiedRun> runs;
  if (Status s = results::LoadUncertifiedRuns(store, &runs); !s.ok()) {
    fmt::print("  (could not list the uncertified runs: {})\n", s.message());
    return;
  }
  for (const auto& run : runs) {
    if (run.completed == 0 && run.failed > 0) {
      fmt::print("  every request of [{}] failed ({}): {}\n", run.label, run.failed,
                 run.failure_reasons);
    } else if (run.validity == schema::Validity::INVALID) {
      fmt::print("  invalid [{}]: {}\n", run.label, run.validity_reasons);
    }
    if (run.client_bound)
      fmt::print("  client-bound [{}]: {}\n", run.label, run.client_bound_reasons);
  }
}

}  // namespace

void AddCoordinatorOptions(CLI::App& cmd, coordinator::CoordinatorSettings& settings,
                           DriverOptions& options) {
  cmd.add_option("--out", settings.out_dir,
                 "Output folder: results.db, summary.csv, report.md, report.html")
      ->required();
  cmd.add_flag("--resume", settings.resume, "Finish the sweep already in --out");
  cmd.add_option("--heartbeat-ms", settings.heartbeat_ms, "Heartbeat interval")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--liveness", settings.liveness, "Missed heartbeats before an agent is lost")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--commit-batch", settings.commit_batch_max,
                 "Results per SQLite transaction (group commit; acks follow the commit); 1 = one "
                 "transaction per result")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--max-frame-bytes", settings.max_frame_bytes,
                 "Largest message accepted from an agent; larger ones are dropped")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--progress", options.progress,
                 "Runs' progress on stdout: auto (a live line per run on a terminal, plain lines "
                 "otherwise), live, plain or off")
      ->capture_default_str();
}

int DriveSweep(coordinator::CoordinatorSettings settings, const DriverOptions& options,
               matrix::LoadedMatrix& matrix,
               const std::function<bool(const std::string& endpoint)>& after_bind) {
  coordinator::ProgressMode mode = coordinator::ProgressMode::kOff;
  if (Status s =
          coordinator::ParseProgressMode(options.progress, ::isatty(STDOUT_FILENO) == 1, &mode);
      !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  coordinator::ProgressDisplay progress(
      mode,
      [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      },
      [] { return coordinator::TerminalColumns(STDOUT_FILENO); });
  coordinator::LogLinesAroundProgress log_lines(progress, mode);
  settings.progress = &progress;
  zmq::context_t context(1);
  coordinator::Coordinator coord(settings, context);
  if (Status s = coord.Prepare(matrix); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  if (Status s = coord.Bind(); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  StopSignals signals([&coord] { coord.RequestStop(); });
  if (after_bind && !after_bind(coord.endpoint())) return kExitError;
  if (Status s = coord.Run(); !s.ok()) {
    spdlog::error("coordinator: {}", s.message());
    return kExitError;
  }
  progress.Finish();
  const auto totals = coord.Totals();
  report::ReportPaths paths;
  if (Status s = report::WriteReports(coord.store(), settings.out_dir, &paths); !s.ok()) {
    spdlog::error("reports: {}", s.message());
    return kExitError;
  }
  fmt::print(
      "servesweep: {} runs: {} done, {} failed, {}{} not finished\n", totals.runs, totals.done,
      totals.failed,
      totals.skipped > 0 ? fmt::format("{} skipped (over-saturated below), ", totals.skipped) : "",
      totals.pending + totals.running);
  PrintUncertifiedRuns(coord.store());
  fmt::print("  results database: {}/results.db\n", settings.out_dir);
  fmt::print("  summary:          {}\n", paths.summary_csv);
  fmt::print("  report:           {}\n", paths.report_md);
  fmt::print("  html report:      {}\n", paths.report_html);
  if (signals.received()) {
    fmt::print("stopped before the end; continue with --resume\n");
    return kExitInterrupted;
  }
  return totals.failed > 0 ? kExitRunsFailed : kExitOk;
}

}  // namespace servesweep::cli
