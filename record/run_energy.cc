#include "record/run_energy.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace servesweep::record {
namespace {

// The GPU that `name` (an index or a UUID) denotes in a read, or nullptr.
const EnergyCounterRead::Gpu* Find(const EnergyCounterRead& read, const std::string& name) {
  for (const auto& gpu : read.gpus) {
    if (gpu.uuid == name || std::to_string(gpu.index) == name) return &gpu;
  }
  return nullptr;
}

// The power samples' name for `name`: gpu<index>.power_w, the index from a read when `name` is
// a UUID.
std::string PowerSignal(const EnergyInputs& in, const std::string& name) {
  const EnergyCounterRead::Gpu* gpu = Find(in.before, name);
  if (gpu == nullptr) gpu = Find(in.after, name);
  const bool is_index = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
  if (gpu == nullptr && !is_index) return "";
  return fmt::format("gpu{}.power_w", gpu != nullptr ? gpu->index : std::stoul(name));
}

double MidS(const EnergyCounterRead& read) { return (read.started_ns + read.finished_ns) / 2e9; }

}  // namespace

RunEnergy MeasureRunEnergy(const EnergyInputs& in) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  RunEnergy out;
  out.energy_j = out.prefill_j = out.decode_j = nan;
  const double phase_s = (in.phase_end_ns - in.phase_start_ns) / 1e9;
  if (in.gpus.empty()) {
    out.source = "n/a: the run has no GPUs on this node";
    out.invalid_reason = out.source.substr(5);
    return out;
  }
  std::vector<std::string> reasons, counted, sampled;
  double total_j = 0, prefill_j = 0, decode_j = 0;
  size_t known = 0;
  for (size_t i = 0; i < in.gpus.size(); ++i) {
    const std::string& name = in.gpus[i];
    const auto* before = Find(in.before, name);
    const auto* after = Find(in.after, name);
    double joules = nan;
    if (before != nullptr && after != nullptr && std::isfinite(before->energy_mj) &&
        std::isfinite(after->energy_mj)) {
      if (after->energy_mj < before->energy_mj) {
        reasons.push_back(fmt::format("GPU {}'s energy counter went back ({} mJ -> {} mJ)", name,
                                      before->energy_mj, after->energy_mj));
        continue;
      }
      joules = (after->energy_mj - before->energy_mj) / 1e3;
      counted.push_back(fmt::format("GPU {}: {:.1f} J", name, joules));
    } else {
      // No counter: the phase's power samples of this GPU, their mean over its length.
      const std::string signal = PowerSignal(in, name);
      const int64_t phase_ns = in.phase_end_ns - in.phase_start_ns;
      double sum_w = 0;
      size_t n = 0;
      for (const auto& s : in.power_samples) {
        if (s.signal == signal && s.at_ns >= 0 && s.at_ns <= phase_ns) {
          sum_w += s.value;
          ++n;
        }
      }
      const std::string why_no_counter =
          !in.before.why_none.empty() || !in.after.why_none.empty()
              ? (in.before.why_none.empty() ? in.after.why_none : in.before.why_none)
              : "not reported";
      const double interval_s = in.power_interval_ms / 1e3;
      if (n == 0) {
        reasons.push_back(
            fmt::format("GPU {} of the run: no energy counter ({}) and no power "
                        "samples",
                        name, why_no_counter));
        continue;
      }
      joules = sum_w / n * phase_s;
      sampled.push_back(fmt::format("GPU {}: {:.1f} J", name, joules));
      if (phase_s < kMinPowerIntervals * interval_s) {
        reasons.push_back(fmt::format(
            "GPU {} has no energy counter ({}) and the measured phase ({:.2f} s) is shorter than "
            "{} power sampling intervals of {} ms",
            name, why_no_counter, phase_s, kMinPowerIntervals, in.power_interval_ms));
      } else if (n < phase_s / interval_s / 2) {
        reasons.push_back(fmt::format(
            "GPU {} has no energy counter ({}) and {} power sample(s) are too sparse for {:.2f} s "
            "(one every {} ms expected)",
            name, why_no_counter, n, phase_s, in.power_interval_ms));
      }
    }
    ++known;
    total_j += joules;
    if (!in.prefill.empty()) (in.prefill[i] ? prefill_j : decode_j) += joules;
  }
  // The counters' window against the phase's: their distance from its edges and half of each
  // read's own time (when within it the counter was read is not known).
  double window_s = phase_s;
  if (!counted.empty()) {
    window_s = MidS(in.after) - MidS(in.before);
    const double uncertain_s = (in.before.finished_ns - in.before.started_ns +
                                in.after.finished_ns - in.after.started_ns) /
                               2e9;
    if (window_s - phase_s + uncertain_s > kEnergyWindowTolerance * phase_s) {
      reasons.push_back(fmt::format(
          "the measured phase ({:.2f} s) is too short for the energy counters: they cover {:.2f} s "
          "and their reads take {:.2f} s, more than {:.0f}% of the phase",
          phase_s, window_s, uncertain_s, kEnergyWindowTolerance * 100));
    }
  }
  if (in.gpus_on_other_nodes > 0) {
    reasons.push_back(
        fmt::format("{} GPU(s) of the run on other nodes are not read", in.gpus_on_other_nodes));
  }
  std::string source;
  if (!counted.empty()) source = fmt::format("counter ({})", fmt::join(counted, ", "));
  if (!sampled.empty()) {
    source += fmt::format("{}power samples every {} ms ({})", source.empty() ? "" : "; ",
                          in.power_interval_ms, fmt::join(sampled, ", "));
  }
  out.known = known == in.gpus.size();
  out.source = source.empty() ? "n/a: " + reasons.front() : source;
  out.window_s = window_s;
  if (out.known) {
    out.energy_j = total_j;
    if (!in.prefill.empty()) {
      out.prefill_j = prefill_j;
      out.decode_j = decode_j;
    }
  }
  out.valid = out.known && reasons.empty();
  out.invalid_reason = fmt::format("{}", fmt::join(reasons, "; "));
  return out;
}

RunEnergy EnergyAtMaxPower(const std::string& hardware, double max_power_w, uint32_t gpus,
                           double phase_s) {
  RunEnergy out;
  out.energy_j = out.prefill_j = out.decode_j = std::numeric_limits<double>::quiet_NaN();
  out.window_s = phase_s;
  if (max_power_w <= 0) {
    out.source = fmt::format("n/a: hardware profile {} has no max_power_w", hardware);
    out.invalid_reason = "simulated run, and its hardware profile has no max_power_w";
    return out;
  }
  out.known = true;
  out.energy_j = max_power_w * gpus * phase_s;
  out.source = fmt::format("model: {} GPU(s) at {}'s max power {:.0f} W (an upper bound)", gpus,
                           hardware, max_power_w);
  out.invalid_reason = "simulated run: estimated at the GPUs' max power, not measured";
  return out;
}

}  // namespace servesweep::record
