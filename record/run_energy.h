// The energy a run's GPUs spent over its measured phase, and whether that figure can be trusted
// (issue #26; docs/results.md#energy). Two ways to know it, per GPU:
//  - its energy counter (NVML's total energy consumption, mJ since the driver loaded; Volta and
//    newer), read just before and just after the measured phase: the difference;
//  - else its power samples (nvidia-smi's power.draw, one per interval, agent/gpu_telemetry.h):
//    their mean times the phase's length.
// The figure is valid only when every GPU of the run is known, the energy covers the same window
// as the tokens it is divided by (MLCommons' endpoints rule: within kEnergyWindowTolerance), and
// samples are dense enough for the window. An invalid figure is still recorded, with why.
// A run on several nodes counts every node's GPUs: the other nodes read their counters when the
// head asks them to (agent/peer_energy.h), and stand for no GPU when they did not answer.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scraper/metrics_scraper.h"

namespace servesweep::record {

// One read of the energy counters: each GPU nvidia-smi listed, its counter in mJ (NaN where it
// printed "[N/A]" or "[Not Supported]"), and when the read ran (steady ns, the child process's
// start and end: the counters were read somewhere between).
struct EnergyCounterRead {
  struct Gpu {
    uint32_t index = 0;
    std::string uuid;
    double energy_mj;  // NaN when not reported
  };
  std::vector<Gpu> gpus;
  int64_t started_ns = 0, finished_ns = 0;
  std::string why_none;  // not empty: the read failed (no nvidia-smi, an unknown field, ...)
};

// The counters' window may exceed the measured phase by this share of it (the reads' own time
// and their distance from the phase's edges) and still be divided by the phase's tokens.
inline constexpr double kEnergyWindowTolerance = 0.05;
// Power samples stand in for a counter over at least this many intervals, with at least half
// of the samples the interval promises.
inline constexpr uint32_t kMinPowerIntervals = 5;

// Another node's GPUs of a multi-node run and their counters. `before` and `after` were read on
// that node at the head's asking; their started_ns/finished_ns are the head's asking and the
// answer's arrival on the head's steady clock (no clock across nodes is trusted).
struct NodeEnergy {
  std::string node;  // its agent id
  std::vector<std::string> gpus;
  std::vector<bool> prefill;  // as EnergyInputs::prefill
  EnergyCounterRead before, after;
};

struct EnergyInputs {
  // The run's GPUs on this node, as nvidia-smi names them: an index ("3") or a UUID
  // ("GPU-..."), the engine's first GPU first. `prefill`: per GPU, in a disaggregated run, whether
  // a prefill instance holds it (else decode); empty when the run is not disaggregated.
  std::vector<std::string> gpus;
  std::vector<bool> prefill;
  uint32_t gpus_on_other_nodes = 0;             // the run's GPUs on other nodes, read or not
  std::vector<NodeEnergy> other_nodes;          // those that answered
  std::vector<std::string> other_nodes_unread;  // why each node that did not answer is missing
  EnergyCounterRead before, after;
  // The measured phase on the steady clock: its tokens lie in [phase_start_ns, phase_end_ns].
  int64_t phase_start_ns = 0, phase_end_ns = 0;
  // gpu<i>.power_w samples, at_ns relative to phase_start_ns, one per power_interval_ms.
  std::vector<scraper::ScrapedSample> power_samples;
  int power_interval_ms = 1000;
};

struct RunEnergy {
  bool known = false;  // any GPU's energy is known (else energy_j is NaN)
  bool valid = false;
  std::string source;          // "counter", "power samples every 1000 ms", or both, or "n/a: why"
  std::string invalid_reason;  // empty when valid
  double energy_j;             // the run's GPUs on every node read, NaN when one is not known
  double window_s = 0;         // what energy_j covers
  double prefill_j, decode_j;  // disaggregated runs' GPUs apart, NaN otherwise
};
RunEnergy MeasureRunEnergy(const EnergyInputs& inputs);

// A simulated run's energy: `gpus` GPUs at the hardware profile's maximum board power for the
// whole phase, an upper bound (there is no power model); never valid, since nothing was
// measured. Unknown (NaN) when the profile has no max_power_w.
RunEnergy EnergyAtMaxPower(const std::string& hardware, double max_power_w, uint32_t gpus,
                           double phase_s);

}  // namespace servesweep::record
