#include "record/run_energy.h"

#include <fmt/format.h>

#include <algorithm>
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
std::string PowerSignal(const NodeEnergy& node, const std::string& name) {
  const EnergyCounterRead::Gpu* gpu = Find(node.before, name);
  if (gpu == nullptr) gpu = Find(node.after, name);
  const bool is_index = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
  if (gpu == nullptr && !is_index) return "";
  return fmt::format("gpu{}.power_w", gpu != nullptr ? gpu->index : std::stoul(name));
}

double MidS(const EnergyCounterRead& read) { return (read.started_ns + read.finished_ns) / 2e9; }

// What the nodes' GPUs add up to, and why the sum cannot be trusted.
struct Tally {
  std::vector<std::string> reasons, counted, sampled;
  double total_j = 0, prefill_j = 0, decode_j = 0;
  size_t gpus = 0, known = 0;
  double window_s = 0;  // the widest counter window of a node, 0 when no counter was read
};

// One node's GPUs into `t`: counters where both reads have them, else the phase's power samples
// (`power_samples`, this node's only; other nodes have none). `where` names the node in
// reasons and sources ("" for the head's).
void CountNode(const EnergyInputs& in, const NodeEnergy& node, const std::string& where,
               const std::vector<scraper::ScrapedSample>& power_samples, Tally* t) {
  const double phase_s = (in.phase_end_ns - in.phase_start_ns) / 1e9;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  bool any_counter = false;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    ++t->gpus;
    const std::string name = node.gpus[i] + where;
    const auto* before = Find(node.before, node.gpus[i]);
    const auto* after = Find(node.after, node.gpus[i]);
    double joules = nan;
    if (before != nullptr && after != nullptr && std::isfinite(before->energy_mj) &&
        std::isfinite(after->energy_mj)) {
      if (after->energy_mj < before->energy_mj) {
        t->reasons.push_back(fmt::format("GPU {}'s energy counter went back ({} mJ -> {} mJ)", name,
                                         before->energy_mj, after->energy_mj));
        continue;
      }
      joules = (after->energy_mj - before->energy_mj) / 1e3;
      any_counter = true;
      t->counted.push_back(fmt::format("GPU {}: {:.1f} J", name, joules));
    } else {
      // No counter: the phase's power samples of this GPU, their mean over its length.
      const std::string signal = PowerSignal(node, node.gpus[i]);
      const int64_t phase_ns = in.phase_end_ns - in.phase_start_ns;
      double sum_w = 0;
      size_t n = 0;
      for (const auto& s : power_samples) {
        if (s.signal == signal && s.at_ns >= 0 && s.at_ns <= phase_ns) {
          sum_w += s.value;
          ++n;
        }
      }
      const std::string why_no_counter =
          !node.before.why_none.empty() || !node.after.why_none.empty()
              ? (node.before.why_none.empty() ? node.after.why_none : node.before.why_none)
              : "not reported";
      const double interval_s = in.power_interval_ms / 1e3;
      if (n == 0) {
        t->reasons.push_back(
            fmt::format("GPU {} of the run: no energy counter ({}) and no power "
                        "samples",
                        name, why_no_counter));
        continue;
      }
      joules = sum_w / n * phase_s;
      t->sampled.push_back(fmt::format("GPU {}: {:.1f} J", name, joules));
      if (phase_s < kMinPowerIntervals * interval_s) {
        t->reasons.push_back(fmt::format(
            "GPU {} has no energy counter ({}) and the measured phase ({:.2f} s) is shorter than "
            "{} power sampling intervals of {} ms",
            name, why_no_counter, phase_s, kMinPowerIntervals, in.power_interval_ms));
      } else if (n < phase_s / interval_s / 2) {
        t->reasons.push_back(fmt::format(
            "GPU {} has no energy counter ({}) and {} power sample(s) are too sparse for {:.2f} s "
            "(one every {} ms expected)",
            name, why_no_counter, n, phase_s, in.power_interval_ms));
      }
    }
    ++t->known;
    t->total_j += joules;
    if (!node.prefill.empty()) (node.prefill[i] ? t->prefill_j : t->decode_j) += joules;
  }
  if (!any_counter) return;
  // The counters' window against the phase's: their distance from its edges and half of each
  // read's own time (when within it the counter was read is not known).
  const double window_s = MidS(node.after) - MidS(node.before);
  t->window_s = std::max(t->window_s, window_s);
  const double uncertain_s = (node.before.finished_ns - node.before.started_ns +
                              node.after.finished_ns - node.after.started_ns) /
                             2e9;
  if (window_s - phase_s + uncertain_s > kEnergyWindowTolerance * phase_s) {
    t->reasons.push_back(fmt::format(
        "the measured phase ({:.2f} s) is too short for the energy counters{}: they cover "
        "{:.2f} s and their reads take {:.2f} s, more than {:.0f}% of the phase",
        phase_s, where, window_s, uncertain_s, kEnergyWindowTolerance * 100));
  }
}

}  // namespace

RunEnergy MeasureRunEnergy(const EnergyInputs& in) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  RunEnergy out;
  out.energy_j = out.prefill_j = out.decode_j = nan;
  if (in.gpus.empty()) {
    out.source = "n/a: the run has no GPUs on this node";
    out.invalid_reason = out.source.substr(5);
    return out;
  }
  Tally t;
  const NodeEnergy head{"", in.gpus, in.prefill, in.before, in.after};
  CountNode(in, head, "", in.power_samples, &t);
  uint32_t other_gpus_read = 0;
  for (const NodeEnergy& node : in.other_nodes) {
    CountNode(in, node, " on node " + node.node, {}, &t);
    other_gpus_read += static_cast<uint32_t>(node.gpus.size());
  }
  if (other_gpus_read < in.gpus_on_other_nodes) {
    t.reasons.push_back(in.other_nodes_unread.empty()
                            ? fmt::format("{} GPU(s) of the run on other nodes are not read",
                                          in.gpus_on_other_nodes - other_gpus_read)
                            : fmt::format("{} GPU(s) of the run on other nodes are not read: {}",
                                          in.gpus_on_other_nodes - other_gpus_read,
                                          fmt::join(in.other_nodes_unread, "; ")));
  }
  std::string source;
  if (!t.counted.empty()) source = fmt::format("counter ({})", fmt::join(t.counted, ", "));
  if (!t.sampled.empty()) {
    source += fmt::format("{}power samples every {} ms ({})", source.empty() ? "" : "; ",
                          in.power_interval_ms, fmt::join(t.sampled, ", "));
  }
  out.known = t.known == t.gpus;
  out.source = source.empty() ? "n/a: " + t.reasons.front() : source;
  out.window_s = t.counted.empty() ? (in.phase_end_ns - in.phase_start_ns) / 1e9 : t.window_s;
  if (out.known) {
    out.energy_j = t.total_j;
    const bool split =
        !in.prefill.empty() || std::any_of(in.other_nodes.begin(), in.other_nodes.end(),
                                           [](const NodeEnergy& n) { return !n.prefill.empty(); });
    if (split) {
      out.prefill_j = t.prefill_j;
      out.decode_j = t.decode_j;
    }
  }
  out.valid = out.known && t.reasons.empty();
  out.invalid_reason = fmt::format("{}", fmt::join(t.reasons, "; "));
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
