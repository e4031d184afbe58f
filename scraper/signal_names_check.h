// The /metrics mapping table (SignalNames(), engine_signals.h) against the metric names an
// installed engine defines: its Prometheus collectors as its server registers them, read by the
// engine check (engine_check.py --metrics; saved samples under tests/data/engine-facts/). Every
// row of the table is checked, so a row added later is checked without a change here.
//
// Thread-safety: pure functions over values.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace servesweep::scraper {

struct DefinedMetrics {
  std::string engine, version;
  std::map<std::string, std::string> exposed;  // sample name -> type (gauge, counter, histogram)
};

// engine_check.py --metrics output.
Status ParseDefinedMetrics(std::string_view json, const std::string& where, DefinedMetrics* out);

// The table's rows of each engine in `installed` against the names those versions define: a row
// no installed version of its engine defines; a signal no row of which one installed version
// defines (a rename: it would scrape nothing); a row whose kind is not the engine's type.
// Empty when every row holds.
std::vector<std::string> CheckSignalNames(const std::vector<DefinedMetrics>& installed);

}  // namespace servesweep::scraper
