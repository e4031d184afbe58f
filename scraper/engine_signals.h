// Engine signals: the benchmark record's view of an engine's /metrics. Engines name the same
// signal differently and rename it between versions, so the mapping is a data table
// (SignalNames() in engine_signals.cc), tested against saved /metrics samples (tests/data/).
//
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <string>
#include <vector>

#include "scraper/prometheus_text.h"

namespace servesweep::scraper {

enum class SignalKind { kGauge, kCounter };

struct SignalName {
  std::string engine;  // "vllm", "sglang", "llamacpp"
  std::string metric;  // the engine's metric name
  std::string signal;  // servesweep's name, e.g. "kv_cache_usage"
  SignalKind kind;
  double scale = 1.0;  // to servesweep's unit (e.g. percent -> fraction)
};

const std::vector<SignalName>& SignalNames();

struct SignalValue {
  std::string signal;
  double value;  // summed over label sets (e.g. several DP ranks)
};

// Signals found in one scrape of `engine`'s /metrics.
std::vector<SignalValue> ExtractSignals(const std::string& engine,
                                        const std::vector<PromSample>& samples);

// Reduction over a run: gauges -> maximum, counters -> last minus first. NaN when never seen.
double ReduceSignal(const std::string& signal, const std::vector<double>& values);
SignalKind KindOf(const std::string& signal);

}  // namespace servesweep::scraper
