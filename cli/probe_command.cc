// `servesweep probe`: the hardware probes of this node. For now the CUDA device query and a
// kernel smoke test; it says "no GPU" cleanly where there is none.
#include <fmt/format.h>

#include "cli/commands.h"
#ifdef SERVESWEEP_HAVE_CUDA
#include "kernels/device_query.h"
#endif

namespace servesweep::cli {

void AddProbeCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("probe", "Probe this node's GPUs");
  cmd->callback([exit_code] {
#ifdef SERVESWEEP_HAVE_CUDA
    const kernels::DeviceQuery query = kernels::QueryDevices();
    fmt::print("cuda runtime {}, driver {}: {}{}\n", query.runtime_version, query.driver_version,
               query.status, query.detail.empty() ? "" : " (" + query.detail + ")");
    for (const auto& d : query.devices) {
      fmt::print("  gpu {}: {} sm_{}{} {} SMs {:.1f} GiB\n", d.index, d.name,
                 d.compute_capability_major, d.compute_capability_minor, d.sm_count,
                 static_cast<double>(d.memory_bytes) / (1u << 30));
    }
    if (query.status == "ok") fmt::print("kernel smoke test: {}\n", kernels::SmokeTestKernel());
    *exit_code = query.status == "failed" ? kExitError : kExitOk;
#else
    fmt::print("no_gpu (this build has no CUDA probes: nvcc was not found at build time)\n");
    *exit_code = kExitOk;
#endif
  });
}

}  // namespace servesweep::cli
