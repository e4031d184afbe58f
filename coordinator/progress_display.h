// The sweep's progress as a person watches it: one line per running run (progress_line.h),
// fed by the coordinator from its dispatches, the agents' progress reports and the results.
//
// Live mode (stdout is a terminal): the lines of the running runs are redrawn in place (carriage
// return, cursor up, erase to end of line) a few times a second, at most 20 lines (the last
// then counts the runs not shown: "... and 7 more running"); a run that ends leaves one
// permanent line ("done in 3.2 s, 500/500 req" or why it failed) above them. Log lines written
// to the same terminal go through LogLinesAroundProgress, which clears the live lines first and
// redraws them after, so the two never garble each other.
// Plain mode (a pipe or a file): no control codes and no carriage returns; one line when a run
// starts, one when it ends, and one per running run every `plain_every_ns`.
//
// Thread-safety: every method may be called from any thread (one mutex); the coordinator's loop
// feeds it while log lines of other threads go through LogLinesAroundProgress.
#pragma once

#include <spdlog/common.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "coordinator/progress_line.h"

namespace servesweep::coordinator {

enum class ProgressMode { kLive, kPlain, kOff };

// "auto" (live when `out_is_terminal`, else plain), "live", "plain" or "off".
Status ParseProgressMode(std::string_view text, bool out_is_terminal, ProgressMode* out);

class ProgressDisplay {
 public:
  using Writer = std::function<void(std::string_view text)>;
  // `width_columns` gives the terminal's width at each redraw (live mode; 0 = no limit).
  ProgressDisplay(ProgressMode mode, Writer write, std::function<size_t()> width_columns,
                  int64_t plain_every_ns = 10'000'000'000);
  ~ProgressDisplay();  // Finish()
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  // A run attempt was placed; `view` names it (position, runs, label, attempt, total).
  void RunAssigned(const std::string& run_id, RunProgressView view, int64_t now_ns);
  // An agent's progress report; reports of other attempts than the displayed one are ignored.
  void RunReported(const std::string& run_id, uint32_t attempt, std::string_view phase,
                   uint32_t completed, uint32_t total, int64_t now_ns);
  // The attempt ended: "done", "failed", "lost, re-queued", ...; `requests_done` (>= 0) is the
  // count of measured requests the result holds, newer than the last progress report.
  void RunEnded(const std::string& run_id, std::string_view outcome, int64_t now_ns,
                int64_t requests_done = -1);
  // Redraws (live, at most ~5 times a second) or prints the periodic plain lines.
  void Tick(int64_t now_ns);
  // Clears the live lines for good (before a summary is printed).
  void Finish();

  // Runs `write_other` (which must not call this display) with the live lines cleared, then
  // redraws them.
  void AroundOtherOutput(const std::function<void()>& write_other);

 private:
  struct Shown {
    RunProgressView view;
    int64_t assigned_ns = 0;
    int64_t last_plain_ns = 0;
    RequestRateWindow rate;
  };
  void UpdateElapsed(Shown& shown, int64_t now_ns) const;
  void ClearLiveLocked();
  void DrawLiveLocked();
  size_t WidthLocked() const;

  ProgressMode mode_;
  Writer write_;
  std::function<size_t()> width_columns_;
  int64_t plain_every_ns_;
  std::mutex mutex_;
  std::map<std::string, Shown> running_;  // by run id
  std::vector<std::string> order_;        // run ids in the order they were assigned
  size_t drawn_lines_ = 0;                // live lines now on the terminal
  int64_t last_draw_ns_ = 0;
  bool finished_ = false;
};

// While alive, every line of the default spdlog logger goes through `display`'s
// AroundOtherOutput (live mode only; otherwise it changes nothing).
class LogLinesAroundProgress {
 public:
  LogLinesAroundProgress(ProgressDisplay& display, ProgressMode mode);
  ~LogLinesAroundProgress();  // puts the logger's own sinks back
  LogLinesAroundProgress(const LogLinesAroundProgress&) = delete;
  LogLinesAroundProgress& operator=(const LogLinesAroundProgress&) = delete;

 private:
  bool installed_ = false;
  std::vector<spdlog::sink_ptr> saved_sinks_;
};

// The terminal's width in columns (TIOCGWINSZ on `fd`, else $COLUMNS, else 80).
size_t TerminalColumns(int fd);

}  // namespace servesweep::coordinator
