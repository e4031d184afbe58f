// Runs this node's GPU probes and reports them: the devices, then one row per figure with its
// expected value and verdict (a table, or one JSON document). Shared by `servesweep probe` and
// the standalone servesweep-gpu-probe of probes-only builds.
//
// Thread-safety: runs the probes on the calling thread, one GPU after another.
#pragma once

#include <string>

namespace servesweep::kernels {

struct ProbeReportSettings {
  bool json = false;
  bool devices_only = false;
  int repeats = 10;
};

// Fills *report; returns true when there is no GPU or every probe is correct and healthy.
bool RunProbeReport(const ProbeReportSettings& settings, std::string* report);

}  // namespace servesweep::kernels
