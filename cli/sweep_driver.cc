#include "cli/sweep_driver.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "coordinator/report.h"

namespace servesweep::cli {

void AddCoordinatorOptions(CLI::App& cmd, coordinator::CoordinatorSettings& settings) {
  cmd.add_option("--out", settings.out_dir, "Output folder: results.db, summary.csv, report.md")
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
}

int DriveSweep(coordinator::CoordinatorSettings settings, coordinator::LoadedMatrix& matrix,
               const std::function<bool(const std::string& endpoint)>& after_bind) {
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
  const auto totals = coord.Totals();
  coordinator::ReportPaths paths;
  if (Status s = coordinator::WriteReports(coord.store(), settings.out_dir, &paths); !s.ok()) {
    spdlog::error("reports: {}", s.message());
    return kExitError;
  }
  fmt::print("servesweep: {} runs: {} done, {} failed, {} not finished\n", totals.runs, totals.done,
             totals.failed, totals.pending + totals.running);
  fmt::print("  results database: {}/results.db\n", settings.out_dir);
  fmt::print("  summary:          {}\n", paths.summary_csv);
  fmt::print("  report:           {}\n", paths.report_md);
  if (signals.received()) {
    fmt::print("stopped before the end; continue with --resume\n");
    return kExitInterrupted;
  }
  return totals.failed > 0 ? kExitRunsFailed : kExitOk;
}

}  // namespace servesweep::cli
