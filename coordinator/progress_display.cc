#include "coordinator/progress_display.h"

#include <fmt/format.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace servesweep::coordinator {
namespace {

constexpr int64_t kLiveRedrawNs = 200'000'000;
constexpr size_t kMaxLiveLines = 20;
// Erase to the end of the line / of the screen (ECMA-48 EL and ED).
constexpr std::string_view kEraseLine = "\x1b[K";
constexpr std::string_view kEraseBelow = "\x1b[J";

// Forwards log lines to the logger's own sinks with the live lines out of the way.
class AroundProgressSink : public spdlog::sinks::sink {
 public:
  AroundProgressSink(ProgressDisplay& display, std::vector<spdlog::sink_ptr> inner)
      : display_(display), inner_(std::move(inner)) {}

  void log(const spdlog::details::log_msg& msg) override {
    display_.AroundOtherOutput([&] {
      for (auto& inner : inner_) {
        if (!inner->should_log(msg.level)) continue;
        inner->log(msg);
        inner->flush();  // before the live lines come back
      }
    });
  }
  void flush() override {
    for (auto& inner : inner_) inner->flush();
  }
  void set_pattern(const std::string& pattern) override {
    for (auto& inner : inner_) inner->set_pattern(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    for (auto& inner : inner_) inner->set_formatter(formatter->clone());
  }

 private:
  ProgressDisplay& display_;
  std::vector<spdlog::sink_ptr> inner_;
};

}  // namespace

Status ParseProgressMode(std::string_view text, bool out_is_terminal, ProgressMode* out) {
  if (text == "auto") {
    *out = out_is_terminal ? ProgressMode::kLive : ProgressMode::kPlain;
  } else if (text == "live") {
    *out = ProgressMode::kLive;
  } else if (text == "plain") {
    *out = ProgressMode::kPlain;
  } else if (text == "off") {
    *out = ProgressMode::kOff;
  } else {
    return Status::InvalidArgument(
        fmt::format("--progress: expected auto, live, plain or off, found '{}'", text));
  }
  return Status::Ok();
}

size_t TerminalColumns(int fd) {
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    const long parsed = std::strtol(columns, nullptr, 10);
    if (parsed > 0) return static_cast<size_t>(parsed);
  }
  return 80;
}

ProgressDisplay::ProgressDisplay(ProgressMode mode, Writer write,
                                 std::function<size_t()> width_columns, int64_t plain_every_ns)
    : mode_(mode),
      write_(std::move(write)),
      width_columns_(std::move(width_columns)),
      plain_every_ns_(plain_every_ns) {}

ProgressDisplay::~ProgressDisplay() { Finish(); }

size_t ProgressDisplay::WidthLocked() const {
  const size_t width = width_columns_ ? width_columns_() : 0;
  // One column short of the edge: a full line would wrap on some terminals, and the cursor-up
  // count would then miss a line.
  return width > 1 ? width - 1 : width;
}

void ProgressDisplay::UpdateElapsed(Shown& shown, int64_t now_ns) const {
  shown.view.elapsed_s = static_cast<double>(now_ns - shown.assigned_ns) / 1e9;
  shown.view.rate_per_s = shown.rate.RatePerS();
}

void ProgressDisplay::ClearLiveLocked() {
  if (drawn_lines_ == 0) return;
  std::string text = "\r";
  if (drawn_lines_ > 1) text += fmt::format("\x1b[{}A", drawn_lines_ - 1);
  text += kEraseBelow;
  write_(text);
  drawn_lines_ = 0;
}

void ProgressDisplay::DrawLiveLocked() {
  if (finished_) return;
  const size_t width = WidthLocked();
  std::string text = "\r";
  if (drawn_lines_ > 1) text += fmt::format("\x1b[{}A", drawn_lines_ - 1);
  size_t lines = 0;
  for (const auto& run_id : order_) {
    if (lines > 0) text += "\n";
    // Cursor-up cannot climb above the screen's top: beyond a screenful, one line counts the rest.
    if (lines + 1 == kMaxLiveLines && order_.size() > kMaxLiveLines) {
      text += fmt::format("... and {} more running", order_.size() - lines);
      text += kEraseLine;
      ++lines;
      break;
    }
    text += FormatProgressLine(running_.at(run_id).view, width);
    text += kEraseLine;
    ++lines;
  }
  text += kEraseBelow;
  write_(text);
  drawn_lines_ = lines;
}

void ProgressDisplay::RunAssigned(const std::string& run_id, RunProgressView view, int64_t now_ns) {
  if (mode_ == ProgressMode::kOff) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Shown shown;
  shown.view = std::move(view);
  shown.assigned_ns = now_ns;
  shown.last_plain_ns = now_ns;
  if (!running_.count(run_id)) order_.push_back(run_id);
  running_[run_id] = std::move(shown);
  if (mode_ == ProgressMode::kPlain) {
    write_(fmt::format("progress: {}\n", FormatProgressLine(running_[run_id].view, 0)));
  } else {
    DrawLiveLocked();
    last_draw_ns_ = now_ns;
  }
}

void ProgressDisplay::RunReported(const std::string& run_id, uint32_t attempt,
                                  std::string_view phase, uint32_t completed, uint32_t total,
                                  int64_t now_ns) {
  if (mode_ == ProgressMode::kOff) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = running_.find(run_id);
  if (it == running_.end() || it->second.view.attempt != attempt) return;
  Shown& shown = it->second;
  if (shown.view.phase != phase) shown.rate.Reset();  // each phase counts its own requests
  shown.view.phase = std::string(phase);
  shown.view.completed = completed;
  if (total > 0) shown.view.total = total;
  shown.rate.Add(now_ns, completed);
}

void ProgressDisplay::RunEnded(const std::string& run_id, std::string_view outcome, int64_t now_ns,
                               int64_t requests_done) {
  if (mode_ == ProgressMode::kOff) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = running_.find(run_id);
  if (it == running_.end()) return;
  Shown& shown = it->second;
  UpdateElapsed(shown, now_ns);
  if (requests_done >= 0) shown.view.completed = static_cast<uint32_t>(requests_done);
  const RunProgressView& v = shown.view;
  std::string line = fmt::format("[{}/{}] {}", v.position, v.runs, v.label);
  if (v.attempt > 1) line += fmt::format(" (attempt {})", v.attempt);
  line += fmt::format(" | {} in {}", outcome, DurationText(v.elapsed_s));
  if (v.total > 0) line += fmt::format(", {}/{} req", v.completed, v.total);
  running_.erase(it);
  std::erase(order_, run_id);
  if (mode_ == ProgressMode::kPlain) {
    write_(fmt::format("progress: {}\n", line));
    return;
  }
  ClearLiveLocked();
  const size_t width = WidthLocked();
  if (width > 0 && line.size() > width) line.resize(width);  // ASCII apart from the label
  write_(line + "\n");
  DrawLiveLocked();
  last_draw_ns_ = now_ns;
}

void ProgressDisplay::Tick(int64_t now_ns) {
  if (mode_ == ProgressMode::kOff) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == ProgressMode::kPlain) {
    for (const auto& run_id : order_) {
      Shown& shown = running_.at(run_id);
      if (now_ns - shown.last_plain_ns < plain_every_ns_) continue;
      shown.last_plain_ns = now_ns;
      UpdateElapsed(shown, now_ns);
      write_(fmt::format("progress: {}\n", FormatProgressLine(shown.view, 0)));
    }
    return;
  }
  if (order_.empty() || now_ns - last_draw_ns_ < kLiveRedrawNs) return;
  for (auto& [run_id, shown] : running_) UpdateElapsed(shown, now_ns);
  DrawLiveLocked();
  last_draw_ns_ = now_ns;
}

void ProgressDisplay::Finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == ProgressMode::kLive) ClearLiveLocked();
  finished_ = true;
}

void ProgressDisplay::AroundOtherOutput(const std::function<void()>& write_other) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ != ProgressMode::kLive) {
    write_other();
    return;
  }
  const bool redraw = drawn_lines_ > 0;
  ClearLiveLocked();
  write_other();
  if (redraw) DrawLiveLocked();
}

LogLinesAroundProgress::LogLinesAroundProgress(ProgressDisplay& display, ProgressMode mode) {
  if (mode != ProgressMode::kLive) return;
  auto& sinks = spdlog::default_logger()->sinks();
  saved_sinks_ = sinks;
  sinks = {std::make_shared<AroundProgressSink>(display, saved_sinks_)};
  installed_ = true;
}

LogLinesAroundProgress::~LogLinesAroundProgress() {
  if (installed_) spdlog::default_logger()->sinks() = saved_sinks_;
}

}  // namespace servesweep::coordinator
