#include "scraper/signal_names_check.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "scraper/engine_signals.h"

namespace servesweep::scraper {

Status ParseDefinedMetrics(std::string_view json, const std::string& where, DefinedMetrics* out) {
  const nlohmann::json root = nlohmann::json::parse(json, nullptr, false);
  if (root.is_discarded() || !root.contains("exposed") || !root["exposed"].is_object()) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected the JSON of engine_check.py --metrics, found something else", where));
  }
  DefinedMetrics m;
  m.engine = root.value("engine", "");
  m.version = root.value("version", "");
  for (const auto& [name, type] : root["exposed"].items())
    m.exposed[name] = type.get<std::string>();
  *out = std::move(m);
  return Status::Ok();
}

namespace {

// prometheus_client's process collector (process_start_time_seconds, ...) describes the Python
// process, not the engine: no engine package defines it, every server exposes it.
bool FromTheProcessCollector(const std::string& metric) { return metric.rfind("process_", 0) == 0; }

}  // namespace

std::vector<std::string> CheckSignalNames(const std::vector<DefinedMetrics>& installed) {
  std::vector<std::string> problems;
  for (const auto& row : SignalNames()) {
    if (FromTheProcessCollector(row.metric)) continue;
    bool checked = false, defined = false;
    for (const auto& version : installed) {
      if (version.engine != row.engine) continue;
      checked = true;
      auto it = version.exposed.find(row.metric);
      if (it == version.exposed.end()) continue;
      defined = true;
      const char* kind = row.kind == SignalKind::kCounter ? "counter" : "gauge";
      if (it->second != kind) {
        problems.push_back(fmt::format("{} {}: {} is a {}, the table reads it as a {} ({})",
                                       version.engine, version.version, row.metric, it->second,
                                       kind, row.signal));
      }
    }
    if (checked && !defined) {
      std::string versions;
      for (const auto& v : installed) {
        if (v.engine == row.engine) versions += (versions.empty() ? "" : ", ") + v.version;
      }
      problems.push_back(fmt::format("{} ({}): no installed {} defines it (checked {})", row.metric,
                                     row.signal, row.engine, versions));
    }
  }
  for (const auto& version : installed) {
    std::set<std::string> signals, found;
    for (const auto& row : SignalNames()) {
      if (row.engine != version.engine || FromTheProcessCollector(row.metric)) continue;
      signals.insert(row.signal);
      if (version.exposed.count(row.metric)) found.insert(row.signal);
    }
    for (const auto& signal : signals) {
      if (!found.count(signal)) {
        problems.push_back(fmt::format(
            "{} {} defines none of the metrics the table reads for '{}': it would scrape nothing",
            version.engine, version.version, signal));
      }
    }
  }
  return problems;
}

}  // namespace servesweep::scraper
