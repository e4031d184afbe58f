#include "search/load_limit.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace servesweep::search {

LoadLimitSearch::LoadLimitSearch(const SearchSpec& spec, double start_level, double first_step)
    : spec_(spec), step_(std::clamp(first_step, 1 + 1e-9, 2.0)), next_(Snap(start_level)) {}

double LoadLimitSearch::Snap(double level) const {
  if (!(level > 0)) level = spec_.load_min;  // NaN too: a model that predicts nothing
  level = std::clamp(level, spec_.load_min, spec_.load_max);
  return spec_.knob == LoadKnob::kConcurrency ? std::round(level) : level;
}

std::optional<double> LoadLimitSearch::Next() const { return next_; }

void LoadLimitSearch::Record(const LevelVerdict& verdict, double objective) {
  if (!next_) return;
  const Measurement m{*next_, verdict, objective};
  measurements_.push_back(m);
  pending_.push_back(m);
  const size_t repeats = pending_.size();
  const size_t wanted = static_cast<size_t>(std::max(spec_.boundary_repeats, 1));
  const auto meeting = static_cast<size_t>(std::count_if(
      pending_.begin(), pending_.end(), [](const Measurement& p) { return p.verdict.meets; }));
  const size_t failing = repeats - meeting;
  // A clear first verdict decides; a close one waits for a second that agrees, or a majority.
  const bool decided = (repeats == 1 && !verdict.close) ||
                       (repeats >= 2 && (meeting == 0 || failing == 0)) || meeting * 2 > wanted ||
                       failing * 2 > wanted || repeats >= wanted;
  if (!decided) return;
  // The median repeat (by margin) decides, with its objective and binding constraint.
  std::vector<Measurement> sorted = pending_;
  std::sort(sorted.begin(), sorted.end(), [](const Measurement& a, const Measurement& b) {
    return a.verdict.margin_pct < b.verdict.margin_pct;
  });
  const Measurement& median = sorted[(sorted.size() - 1) / 2];
  std::vector<double> objectives;
  for (const auto& p : pending_) objectives.push_back(p.objective);
  std::sort(objectives.begin(), objectives.end());
  const size_t n = objectives.size();
  const double median_objective =
      n % 2 == 1 ? objectives[n / 2] : (objectives[n / 2 - 1] + objectives[n / 2]) / 2;
  // The majority side; a tie (an even count) goes to the median repeat's side.
  const bool meets = meeting * 2 > repeats   ? true
                     : failing * 2 > repeats ? false
                                             : median.verdict.meets;
  Decide(meets, median_objective, median.verdict.binding);
}

void LoadLimitSearch::Decide(bool meets, double objective, const std::string& binding) {
  const Decided d{*next_, meets, objective, binding};
  pending_.clear();
  if (meets) {
    if (!best_meeting_ || d.level > best_meeting_->level) best_meeting_ = d;
  } else if (!lowest_failing_ || d.level < lowest_failing_->level) {
    lowest_failing_ = d;
  }
  next_ = Choose();
  if (!best_meeting_ || !lowest_failing_) step_ = std::min(step_ * step_, 2.0);
}

std::optional<double> LoadLimitSearch::Choose() const {
  const bool whole = spec_.knob == LoadKnob::kConcurrency;
  if (best_meeting_ && !lowest_failing_) {
    const double lo = best_meeting_->level;
    if (lo >= spec_.load_max) return std::nullopt;  // load.max met
    const double up = Snap(lo * step_);
    return whole ? std::max(up, lo + 1) : up;  // a small step still moves a concurrency
  }
  if (!best_meeting_ && lowest_failing_) {
    const double hi = lowest_failing_->level;
    if (hi <= spec_.load_min) return std::nullopt;  // not even load.min meets
    const double down = Snap(hi / step_);
    return whole ? std::min(down, hi - 1) : down;
  }
  const double lo = best_meeting_->level, hi = lowest_failing_->level;
  if (hi / lo <= 1 + spec_.precision) return std::nullopt;
  const double mid = Snap(std::sqrt(lo * hi));
  if (mid <= lo || mid >= hi) return std::nullopt;  // adjacent concurrencies
  return mid;
}

std::optional<double> LoadLimitSearch::limit() const {
  if (!best_meeting_) return std::nullopt;
  return best_meeting_->level;
}

std::optional<double> LoadLimitSearch::lowest_failing() const {
  if (!lowest_failing_) return std::nullopt;
  return lowest_failing_->level;
}

double LoadLimitSearch::uncertainty() const {
  if (!best_meeting_) return std::numeric_limits<double>::quiet_NaN();
  return lowest_failing_ ? lowest_failing_->level / best_meeting_->level - 1 : 0;
}

double LoadLimitSearch::objective_at_limit() const {
  return best_meeting_ ? best_meeting_->objective : std::numeric_limits<double>::quiet_NaN();
}

std::string LoadLimitSearch::binding() const {
  return lowest_failing_ ? lowest_failing_->binding : "";
}

}  // namespace servesweep::search
