// How often the over-saturation rule (loadgen/early_stop.h) fires, and how soon, on simulated
// queues with known load: Poisson arrivals at rho x capacity into c servers of a fixed service
// time (first token 5% into service), starting empty as a measured phase after a drained
// warm-up does, judged at every event over two minutes. rho < 1 firing is a false alarm; rho >=
// 1.1 not firing (or late) is a miss. Seeds 1..N; prints a table for bench/README.md.
//
//   early_stop_detection [--seeds N] [--window-s S] [--min-s S] [--min-growth G]
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "loadgen/early_stop.h"

namespace {

using servesweep::loadgen::EarlyStopJudge;
using servesweep::loadgen::StopReason;

// The measured second at which the rule fired, or -1.
double FirstDetection(double rho, int servers, double service_s, unsigned seed,
                      const servesweep::workload::EarlyStopSettings& settings, double horizon_s) {
  EarlyStopJudge judge(settings, /*watch_in_flight=*/true);
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(rho * servers / service_s);
  std::vector<double> arrivals;
  for (double t = gap(rng); t < horizon_s; t += gap(rng)) arrivals.push_back(t);
  std::vector<double> free_at(servers, 0.0), start(arrivals.size());
  for (size_t i = 0; i < arrivals.size(); ++i) {  // first come, first served
    auto server = std::min_element(free_at.begin(), free_at.end());
    start[i] = std::max(arrivals[i], *server);
    *server = start[i] + service_s;
  }
  struct Event {
    double t_s;
    bool end;
    size_t i;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    events.push_back({arrivals[i], false, i});
    events.push_back({start[i] + service_s, true, i});
  }
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.t_s < b.t_s; });
  uint32_t in_flight = 0;
  for (const Event& e : events) {
    if (e.t_s > horizon_s) break;
    if (!e.end) {
      judge.Sent(e.t_s, ++in_flight);
    } else {
      EarlyStopJudge::Ended ended;
      ended.t_s = e.t_s;
      ended.in_flight = --in_flight;
      ended.success = true;
      ended.first_token_s = start[e.i] + 0.05 * service_s;
      ended.due_to_first_token_s = ended.first_token_s - arrivals[e.i];
      ended.ttft_s = ended.due_to_first_token_s;
      judge.End(ended);
    }
    if (judge.Judge(e.t_s).reason == StopReason::kOversaturated) return judge.Judge(e.t_s).at_s;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  servesweep::workload::EarlyStopSettings settings;
  settings.oversaturated = true;
  unsigned seeds = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const double value = std::atof(argv[i + 1]);
    if (flag == "--seeds")
      seeds = static_cast<unsigned>(value);
    else if (flag == "--window-s")
      settings.window_s = value;
    else if (flag == "--min-s")
      settings.min_s = value;
    else if (flag == "--min-growth")
      settings.min_growth = value;
    else {
      fmt::print(stderr, "unknown flag {}\n", flag);
      return 2;
    }
  }
  constexpr double kHorizonS = 120;
  fmt::print("min_s {} window_s {} min_growth {}; {} seeds, {} s each\n\n", settings.min_s,
             settings.window_s, settings.min_growth, seeds, kHorizonS);
  fmt::print(
      "| servers x service | rho | fired | median s to fire | latest s |\n|---|---|---|---|---|\n");
  for (const auto& [servers, service_s] :
       {std::pair{1, 0.1}, std::pair{16, 2.0}, std::pair{256, 8.0}}) {
    for (double rho : {0.5, 0.8, 0.9, 0.95, 1.0, 1.1, 1.2, 1.5, 2.0}) {
      std::vector<double> at;
      for (unsigned seed = 1; seed <= seeds; ++seed) {
        const double t = FirstDetection(rho, servers, service_s, seed, settings, kHorizonS);
        if (t >= 0) at.push_back(t);
      }
      std::sort(at.begin(), at.end());
      fmt::print("| {} x {} s | {:.2f} | {}/{} | {} | {} |\n", servers, service_s, rho, at.size(),
                 seeds, at.empty() ? "-" : fmt::format("{:.1f}", at[at.size() / 2]),
                 at.empty() ? "-" : fmt::format("{:.1f}", at.back()));
    }
  }
  return 0;
}
