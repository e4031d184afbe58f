#include "loadgen/early_stop.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "loadgen/bench_metrics.h"

namespace servesweep::loadgen {
namespace {

// Student's t, one-sided 95% (the 0.95 quantile), by degrees of freedom.
double TQuantile95(uint32_t df) {
  static constexpr std::array<double, 30> kTable = {
      6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
      1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
      1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697};
  if (df == 0) return INFINITY;
  if (df <= kTable.size()) return kTable[df - 1];
  if (df <= 60) return 1.684;  // the value at 40: conservative up to 60
  if (df <= 120) return 1.671;
  return 1.645;
}

// A window's figures, in the order of kFigureNames.
constexpr std::array<const char*, 4> kFigureNames = {"output tok/s", "TTFT p50 ms", "TTFT p90 ms",
                                                     "TPOT p50 ms"};
constexpr double kLatencyAgreeMs = 1;  // latencies this close agree, whatever their ratio

}  // namespace

void SlidingSlope::Add(double x, double y) {
  points_.emplace_back(x, y);
  sx_ += x;
  sy_ += y;
  sxx_ += x * x;
  sxy_ += x * y;
  syy_ += y * y;
}

void SlidingSlope::DropBefore(double x_min) {
  while (!points_.empty() && points_.front().first < x_min) {
    const auto [x, y] = points_.front();
    sx_ -= x;
    sy_ -= y;
    sxx_ -= x * x;
    sxy_ -= x * y;
    syy_ -= y * y;
    points_.pop_front();
  }
  if (points_.empty()) sx_ = sy_ = sxx_ = sxy_ = syy_ = 0;  // no drift left behind
}

SlidingSlope::Fit SlidingSlope::Fitted() const {
  Fit fit;
  fit.n = static_cast<uint32_t>(points_.size());
  if (fit.n == 0) return fit;
  const double n = fit.n;
  fit.mean_y = sy_ / n;
  fit.span_x = points_.back().first - points_.front().first;
  const double sxx = sxx_ - sx_ * sx_ / n;
  if (fit.n < 3 || !(sxx > 0)) return fit;
  const double sxy = sxy_ - sx_ * sy_ / n;
  const double syy = syy_ - sy_ * sy_ / n;
  fit.slope = sxy / sxx;
  const double sse = std::max(0.0, syy - fit.slope * sxy);
  const double se = std::sqrt(sse / (n - 2) / sxx);
  fit.slope_low = fit.slope - TQuantile95(fit.n - 2) * se;
  return fit;
}

EarlyStopJudge::EarlyStopJudge(const workload::EarlyStopSettings& settings, bool watch_in_flight)
    : settings_(settings), watch_in_flight_(watch_in_flight) {
  next_stable_check_ =
      std::max(settings_.min_requests, settings_.windows * settings_.window_requests);
  next_saturation_check_s_ = settings_.min_s;
}

void EarlyStopJudge::Integrate(double t_s, uint32_t in_flight) {
  if (t_s > area_t_s_) in_flight_area_ += last_in_flight_ * (t_s - area_t_s_);
  area_t_s_ = std::max(area_t_s_, t_s);
  last_in_flight_ = in_flight;
}

void EarlyStopJudge::Sent(double t_s, uint32_t in_flight) {
  Integrate(t_s, in_flight);
  if (settings_.oversaturated && watch_in_flight_ && t_s >= 0) in_flight_.Add(t_s, in_flight);
}

void EarlyStopJudge::End(const Ended& e) {
  ++completed_;
  Integrate(e.t_s, e.in_flight);
  if (settings_.oversaturated) {
    if (watch_in_flight_ && e.t_s >= 0) in_flight_.Add(e.t_s, e.in_flight);
    if (e.success && e.due_to_first_token_s >= 0 && e.first_token_s >= 0) {
      delay_.Add(e.first_token_s, e.due_to_first_token_s);
      latest_first_token_s_ = std::max(latest_first_token_s_, e.first_token_s);
    }
  }
  if (settings_.stable && e.success && e.ttft_s >= 0 && e.e2e_s > 0) {
    ++successes_;
    recent_.push_back({e.t_s, in_flight_area_, e.output_tokens, e.ttft_s, e.tpot_s, e.e2e_s});
    const size_t keep = size_t{settings_.windows} * settings_.window_requests + 1;
    while (recent_.size() > keep) recent_.pop_front();
  }
}

const StopVerdict& EarlyStopJudge::Judge(double t_s) {
  if (verdict_.reason != StopReason::kNone) return verdict_;
  verdict_.at_s = t_s;
  verdict_.completed = completed_;
  if (settings_.stable && successes_ >= next_stable_check_ && JudgeStable()) {
    verdict_.reason = StopReason::kStable;
  } else if (settings_.oversaturated && t_s >= next_saturation_check_s_ &&
             JudgeOversaturated(t_s)) {
    verdict_.reason = StopReason::kOversaturated;
  } else if (settings_.max_duration_s > 0 && t_s >= settings_.max_duration_s) {
    verdict_.reason = StopReason::kMaxDuration;
    verdict_.evidence = fmt::format(
        "measured {:.1f} s, the cap (max_duration_s {}), before an early-stop rule held", t_s,
        settings_.max_duration_s);
  }
  return verdict_;
}

bool EarlyStopJudge::JudgeStable() {
  // Judged again a quarter window later when not yet stable: the windows slide by completions.
  next_stable_check_ = successes_ + std::max<uint32_t>(1, settings_.window_requests / 4);
  const uint32_t k = settings_.windows, w = settings_.window_requests;
  if (recent_.size() < size_t{k} * w + 1) return false;
  std::vector<std::array<double, 4>> figures(k);
  for (uint32_t j = 0; j < k; ++j) {
    const size_t first = 1 + size_t{j} * w;  // recent_[first - 1] ends the window before
    const Done& before = recent_[first - 1];
    const Done& last = recent_[first + w - 1];
    double tokens = 0, e2e_s = 0;
    std::vector<double> ttft, tpot;
    for (size_t i = first; i < first + w; ++i) {
      tokens += recent_[i].output_tokens;
      e2e_s += recent_[i].e2e_s;
      ttft.push_back(recent_[i].ttft_s * 1e3);
      if (recent_[i].tpot_s >= 0) tpot.push_back(recent_[i].tpot_s * 1e3);
    }
    // Output tok/s by Little's law: the requests in flight over the window (their time average)
    // over the mean E2E latency, times the mean output length. Counting completions over the
    // window's span instead swings by a whole batch when requests finish in batches.
    const double span_s = last.t_s - before.t_s;
    const double in_flight =
        span_s > 0 ? (last.in_flight_area - before.in_flight_area) / span_s : 0;
    figures[j][0] = span_s > 0 ? in_flight / (e2e_s / w) * (tokens / w) : INFINITY;
    // Percentiles as the record's figures have them (numpy's linear interpolation).
    const Stats ttft_ms = ComputeStats(std::move(ttft));
    figures[j][1] = ttft_ms.median;
    figures[j][2] = ttft_ms.p90;
    figures[j][3] = tpot.empty() ? 0 : ComputeStats(std::move(tpot)).median;
  }
  std::string evidence;
  for (size_t f = 0; f < kFigureNames.size(); ++f) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (const auto& window : figures) {
      lo = std::min(lo, window[f]);
      hi = std::max(hi, window[f]);
      sum += window[f];
    }
    const double mean = sum / k;
    if (!std::isfinite(hi)) return false;
    const bool latency = f > 0;
    const double spread_pct = mean > 0 ? 100 * (hi - lo) / mean : 0;
    if (spread_pct > settings_.tolerance_pct && !(latency && hi - lo <= kLatencyAgreeMs)) {
      return false;
    }
    evidence += fmt::format("{}{} {:.4g}..{:.4g} ({:.1f}%)", evidence.empty() ? "" : ", ",
                            kFigureNames[f], lo, hi, spread_pct);
  }
  verdict_.evidence = fmt::format("the last {} windows of {} requests agree within {}%: {}", k, w,
                                  settings_.tolerance_pct, evidence);
  return true;
}

bool EarlyStopJudge::JudgeOversaturated(double t_s) {
  next_saturation_check_s_ = t_s + 0.25;  // a fit is O(1), but nothing changes faster than that
  const double from_s = t_s - settings_.window_s;
  // A delay is learned when its request ends, its decode after the first token: the window of
  // delays ends at the latest first token known, or requests that decode for longer than half the
  // window (an over-saturated engine's slow decode) would never cover it.
  delay_.DropBefore(std::min(t_s, latest_first_token_s_) - settings_.window_s);
  in_flight_.DropBefore(from_s);
  // Over-saturated, both signals estimate rho - 1 (arrivals over completions, minus one): the wait
  // grows by (lambda - mu) / mu seconds per second, and so do the requests in flight per
  // completion. Rising means significantly (the slope's 95% lower bound above 0) and by at
  // least min_growth, over at least half the window with a few points: a stationary queue, even
  // a long and noisy one, drifts far slower than that.
  auto rising = [&](const SlidingSlope::Fit& fit, double growth) {
    return fit.n >= 8 && fit.span_x >= settings_.window_s / 2 && fit.slope_low > 0 &&
           growth >= settings_.min_growth;
  };
  const SlidingSlope::Fit delay = delay_.Fitted();
  if (!rising(delay, delay.slope)) return false;
  std::string evidence = fmt::format(
      "due -> first token grew {:.3g} s per s (95% lower bound {:.3g}) over the last {:.1f} s "
      "({} requests, mean {:.3g} s)",
      delay.slope, delay.slope_low, delay.span_x, delay.n, delay.mean_y);
  if (watch_in_flight_) {
    const SlidingSlope::Fit in_flight = in_flight_.Fitted();
    const double completions_per_s = delay.span_x > 0 ? delay.n / delay.span_x : 0;
    const double growth = completions_per_s > 0 ? in_flight.slope / completions_per_s : 0;
    if (!rising(in_flight, growth)) return false;
    evidence += fmt::format(
        "; requests in flight grew {:.3g} per s (lower bound {:.3g}) against {:.3g} completions "
        "per s",
        in_flight.slope, in_flight.slope_low, completions_per_s);
  }
  verdict_.evidence = evidence;
  return true;
}

}  // namespace servesweep::loadgen
