#include "coordinator/progress_line.h"

#include <fmt/format.h>

#include <cmath>

namespace servesweep::coordinator {
namespace {

// Phases whose counts are requests being sent now: they get a rate and an ETA.
bool Counting(std::string_view phase) { return phase == "warmup" || phase == "measuring"; }

size_t Columns(std::string_view text) {
  size_t columns = 0;
  for (unsigned char c : text) columns += (c & 0xC0) != 0x80;  // continuation bytes add none
  return columns;
}

// The longest prefix of `text` of at most `columns` code points.
std::string_view FirstColumns(std::string_view text, size_t columns) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (seen == columns) return text.substr(0, i);
    ++seen;
  }
  return text;
}

}  // namespace

std::string PhaseText(std::string_view phase) {
  if (phase == "starting") return "starting engine";
  if (phase == "warmup") return "warm-up";
  if (phase == "quality") return "quality tasks";
  return std::string(phase);
}

std::string DurationText(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  if (seconds < 10) return fmt::format("{:.1f} s", seconds);
  const auto whole = static_cast<int64_t>(std::llround(seconds));
  if (whole < 60) return fmt::format("{} s", whole);
  if (whole < 3600) return fmt::format("{} m {:02} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02} m", whole / 3600, whole % 3600 / 60);
}

double EtaS(uint32_t completed, uint32_t total, double rate_per_s) {
  if (total == 0 || !(rate_per_s > 0) || !std::isfinite(rate_per_s)) return -1;
  if (completed >= total) return 0;
  return static_cast<double>(total - completed) / rate_per_s;
}

std::string FormatProgressLine(const RunProgressView& view, size_t width_columns) {
  std::string name = fmt::format("[{}/{}] {}", view.position, view.runs, view.label);
  if (view.attempt > 1) name += fmt::format(" (attempt {})", view.attempt);
  std::string status = " | " + PhaseText(view.phase);
  if (view.total > 0 && (Counting(view.phase) || view.phase == "draining")) {
    status += fmt::format(" {}/{} req", view.completed, view.total);
  } else {
    status += " " + DurationText(view.elapsed_s);
  }
  if (Counting(view.phase)) {
    status += view.rate_per_s >= 0 ? fmt::format(" | {:.1f} req/s", view.rate_per_s)
                                   : std::string(" | -- req/s");
    status += " | ETA " + DurationText(EtaS(view.completed, view.total, view.rate_per_s));
  }
  if (width_columns == 0 || Columns(name) + Columns(status) <= width_columns) {
    return name + status;
  }
  // The label gives way first: the figures are what a person watches.
  constexpr std::string_view kEllipsis = "...";
  constexpr size_t kShortestName = 8;
  const size_t status_columns = Columns(status);
  if (width_columns >= status_columns + kShortestName) {
    const size_t keep = width_columns - status_columns - kEllipsis.size();
    return std::string(FirstColumns(name, keep)) + std::string(kEllipsis) + status;
  }
  return std::string(FirstColumns(name + status, width_columns));
}

void RequestRateWindow::Add(int64_t at_ns, uint32_t completed) {
  if (!reports_.empty() && completed < reports_.back().second) reports_.clear();  // a new count
  reports_.emplace_back(at_ns, completed);
  // Keep the newest report older than the window, so the window is always spanned.
  while (reports_.size() > 2 && reports_[1].first <= at_ns - window_ns_) reports_.pop_front();
}

double RequestRateWindow::RatePerS() const {
  if (reports_.size() < 2) return -1;
  const auto& [first_ns, first_done] = reports_.front();
  const auto& [last_ns, last_done] = reports_.back();
  if (last_ns <= first_ns) return -1;
  return static_cast<double>(last_done - first_done) /
         (static_cast<double>(last_ns - first_ns) / 1e9);
}

}  // namespace servesweep::coordinator
