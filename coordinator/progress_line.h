// One run's live progress as one line of text, e.g.
//   [3/8] concurrency=4 repeat=1 | measuring 120/500 req | 38.2 req/s | ETA 10 s
// Pure parts of the sweep's progress display (progress_display.h): the request rate over a
// sliding window of the agents' progress reports, the ETA, and the line fitted to a terminal
// width. The line never holds terminal control codes: those are the display's, and only when it
// writes to a terminal.
//
// Thread-safety: plain values and functions; a RequestRateWindow is not shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>

namespace servesweep::coordinator {

// What a progress line shows of one run attempt.
struct RunProgressView {
  uint32_t position = 0;  // 1-based place of the run in the sweep
  uint32_t runs = 0;      // runs in the sweep
  std::string label;      // the run's label, e.g. "concurrency=4 repeat=1"
  uint32_t attempt = 1;
  // The agent's phase ("assigned" before its first report): "starting", "warmup", "measuring",
  // "quality", "draining".
  std::string phase = "assigned";
  uint32_t completed = 0;  // requests of the phase done (warm-up or measured)
  uint32_t total = 0;      // requests of the phase; 0 = unknown
  double rate_per_s = -1;  // completed requests per second, recent; < 0 = not known yet
  double elapsed_s = 0;    // since the run was assigned
};

// The phase as a person reads it: "starting" -> "starting engine", "warmup" -> "warm-up".
std::string PhaseText(std::string_view phase);

// "0.4 s", "42 s", "3 m 05 s", "1 h 02 m"; "--" for a negative or non-finite value.
std::string DurationText(double seconds);

// Seconds until `total` requests are done at `rate_per_s`; < 0 when unknown (no rate, no total).
double EtaS(uint32_t completed, uint32_t total, double rate_per_s);

// The line for one run, at most `width_columns` columns wide (0 = no limit). When it does not
// fit, the label is shortened first ("..."), so the counts, rate and ETA stay readable; a width
// too small even for those cuts the line's end. Columns count UTF-8 code points.
std::string FormatProgressLine(const RunProgressView& view, size_t width_columns);

// The request rate of one phase from cumulative counts reported over time: completed requests
// per second over the reports of the last `window_ns` (at least two reports needed).
class RequestRateWindow {
 public:
  explicit RequestRateWindow(int64_t window_ns = 5'000'000'000) : window_ns_(window_ns) {}
  // Forgets every report (a new phase counts from zero).
  void Reset() { reports_.clear(); }
  void Add(int64_t at_ns, uint32_t completed);
  // < 0 until two reports at different times are held.
  double RatePerS() const;

 private:
  int64_t window_ns_;
  std::deque<std::pair<int64_t, uint32_t>> reports_;  // (at_ns, completed), oldest first
};

}  // namespace servesweep::coordinator
