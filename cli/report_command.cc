// `servesweep report DIR`: rewrites summary.csv, report.md and report.html from DIR/results.db.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "report/report.h"
#include "results/results_store.h"

namespace servesweep::cli {

void AddReportCommand(CLI::App& app, int* exit_code) {
  auto dir = std::make_shared<std::string>();
  auto selection = std::make_shared<report::RunSelection>();
  auto* cmd = app.add_subcommand(
      "report", "Write summary.csv, report.md and report.html from a results folder");
  cmd->add_option("dir", *dir, "Output folder of a sweep (holds results.db)")->required();
  cmd->add_flag("--include-invalid", selection->include_uncertified,
                "Use invalid and client-bound runs in curves, knees, frontiers and comparison "
                "groups too (they are listed either way)");
  cmd->callback([dir, selection, exit_code] {
    const std::string db = *dir + "/results.db";
    if (!std::filesystem::exists(db)) {
      spdlog::error("{}: expected a results database, found none", db);
      *exit_code = kExitError;
      return;
    }
    std::unique_ptr<results::ResultsStore> store;
    report::ReportPaths paths;
    Status s = results::ResultsStore::Open(db, &store);
    if (s.ok()) s = report::WriteReports(*store, *dir, &paths, *selection);
    if (!s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    fmt::print("summary: {}\nreport:  {}\nhtml:    {}\n", paths.summary_csv, paths.report_md,
               paths.report_html);
    *exit_code = kExitOk;
  });
}

}  // namespace servesweep::cli
