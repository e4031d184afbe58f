// Whether a measured phase has its answer before its full length (workload::EarlyStopSettings,
// docs/matrix.md#early-stop): stable figures, an over-saturated engine, or the time cap. The
// judge sees the phase as the load loop does (sends and ends, in order) and keeps O(1) work per
// event; the rules, with their thresholds, are the settings' comment in workload/load_settings.h.
//
// Over-saturation follows GuideLLM's over-saturation detection (docs/guides/over_saturation
// _stopping.md: a linear-regression slope of TTFT and of concurrent requests over a sliding
// window, significant by a t-test), with two changes: the delay is measured from the request's
// due time (so a client queue behind max_in_flight counts), and a slope must also be material:
// at least min_growth seconds per second, which is how fast a queue fed at (1 + min_growth) times
// its service rate grows, whatever the batch size or service time; a long window of
// autocorrelated samples makes any slope "significant", and a stationary queue's drift (its
// warm-up transient included) is far below that.
//
// Times are seconds from the start of the measured phase (requests before it, a timed warm-up's,
// are not judged). Thread-compatible: one caller at a time (the loop's source lock).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "workload/load_settings.h"

namespace servesweep::loadgen {

// The record's `stopped` (schema::StopReason; its stored names in results/record_columns.h).
enum class StopReason { kNone, kStable, kOversaturated, kMaxDuration };

struct StopVerdict {
  StopReason reason = StopReason::kNone;
  double at_s = 0;         // measured seconds when it was judged
  uint32_t completed = 0;  // measured requests ended by then
  std::string evidence;    // the figures that decided, in words
};

// An ordinary least-squares line through (x, y) points of a window that slides forward in x.
class SlidingSlope {
 public:
  void Add(double x, double y);
  void DropBefore(double x);  // forgets the points with x < this
  struct Fit {
    uint32_t n = 0;
    double slope = 0;      // dy/dx
    double slope_low = 0;  // one-sided 95% lower confidence bound of the slope
    double mean_y = 0;
    double span_x = 0;  // last x - first x
  };
  Fit Fitted() const;  // n < 3 (or every x equal): n and mean_y only, slopes 0

 private:
  std::deque<std::pair<double, double>> points_;
  double sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0, syy_ = 0;
};

class EarlyStopJudge {
 public:
  // `watch_in_flight`: an open loop without max_in_flight, whose queue is its requests in flight.
  EarlyStopJudge(const workload::EarlyStopSettings& settings, bool watch_in_flight);

  // A request was sent at t_s; in_flight counts every request in flight after it. Sends and ends
  // come in time order.
  void Sent(double t_s, uint32_t in_flight);
  // A measured request ended at t_s (in_flight: after it). The delays are in seconds, < 0 when
  // not reached (a failure): due -> first token, sent -> first token, and the mean time per
  // output token after the first (< 0 with one token).
  struct Ended {
    double t_s = 0;
    uint32_t in_flight = 0;
    bool success = false;
    uint32_t output_tokens = 0;
    double first_token_s = -1;  // when its first token came
    double due_to_first_token_s = -1;
    double ttft_s = -1;
    double tpot_s = -1;
    double e2e_s = -1;  // sent -> done
  };
  void End(const Ended& ended);

  // The verdict at t_s: kNone while the phase should go on; once given, it stays.
  const StopVerdict& Judge(double t_s);

 private:
  struct Done {
    double t_s;
    double in_flight_area;  // in_flight_area_ when it ended
    uint32_t output_tokens;
    double ttft_s, tpot_s, e2e_s;
  };
  // Requests in flight integrated over time (request-seconds), up to t_s.
  void Integrate(double t_s, uint32_t in_flight);
  bool JudgeStable();
  bool JudgeOversaturated(double t_s);

  workload::EarlyStopSettings settings_;
  bool watch_in_flight_;
  StopVerdict verdict_;
  uint32_t completed_ = 0;
  double in_flight_area_ = 0, area_t_s_ = 0;
  uint32_t last_in_flight_ = 0;
  // Stable: the last windows x window_requests + 1 successful completions, oldest first.
  std::deque<Done> recent_;
  uint32_t successes_ = 0;
  uint32_t next_stable_check_ = 0;  // the success count at which stability is judged next
  // Oversaturated: due -> first token against the first token's time; in flight against time.
  SlidingSlope delay_;
  double latest_first_token_s_ = 0;  // of the delays in delay_
  SlidingSlope in_flight_;
  double next_saturation_check_s_ = 0;
};

}  // namespace servesweep::loadgen
