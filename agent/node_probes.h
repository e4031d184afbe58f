// The node's pre-flight probes, as the agent reports them to the coordinator: real GPUs are
// probed (HBM, GEMM, host link) and judged against their model and each other; emulated GPUs
// report figures given on the command line (to rehearse a sick node without one), or nothing.
//
// Thread-safety: RunNodeProbes may run on any thread; it uses the GPUs exclusively meanwhile.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/probe_verdict.h"
#include "schema/wire.capnp.h"

namespace servesweep::agent {

struct NodeProbeSettings {
  uint32_t emulated_gpus = 0;  // > 0: this node's GPUs are emulated
  std::string emulated_gpu_name = "emulated";
  std::vector<kernels::Figure> emulated_figures;
  uint32_t repeats = 5;
};

// Parses "probe[@gpu]=value,..." (e.g. "hbm.triad=3000,gemm.bf16@1=600"); gpu defaults to 0.
Status ParseEmulatedFigures(const std::string& text, std::vector<kernels::Figure>* out);

void RunNodeProbes(const NodeProbeSettings& settings, schema::ProbeReport::Builder report);

}  // namespace servesweep::agent
