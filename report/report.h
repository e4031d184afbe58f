// Reports, written from the results database only (never from a running sweep's memory):
// summary.csv (one row per run, the benchmark-record columns of docs/results.md), report.md (a
// readable table of the sweep, failures listed with their reasons, knee and best SLO point per
// configuration, cost, diagnosis) and report.html (the same with inline SVG plots;
// docs/report.md).
//
// Thread-safety: functions over a store the caller owns.
#pragma once

#include <string>

#include "common/status.h"
#include "report/comparison.h"
#include "results/results_store.h"

namespace servesweep::report {

struct ReportPaths {
  std::string summary_csv;
  std::string report_md;
  std::string report_html;
};

// Writes the three files into `out_dir`. Curves, knees, frontiers, diagnosis and comparison
// groups use the runs `selection` uses (certified ones by default); every run is listed.
Status WriteReports(results::ResultsStore& store, const std::string& out_dir, ReportPaths* paths,
                    const RunSelection& selection = {});

// CSV field quoting per RFC 4180.
std::string CsvField(const std::string& value);

}  // namespace servesweep::report
