// `servesweep probe`: this node's hardware probes (CUDA devices, HBM, GEMM, host link), each
// judged against the GPU model's expected figure and the node's other GPUs. Says "no_gpu"
// cleanly where there is none.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#ifdef SERVESWEEP_HAVE_CUDA
#include "kernels/probe_report.h"
#endif

namespace servesweep::cli {

void AddProbeCommand(CLI::App& app, int* exit_code) {
  struct Options {
    bool json = false;
    bool devices_only = false;
    int repeats = 10;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("probe", "Probe this node's GPUs (HBM, GEMM, host link)");
  cmd->add_flag("--json", o->json, "One JSON document instead of tables");
  cmd->add_flag("--devices-only", o->devices_only, "List the devices; run no probe");
  cmd->add_option("--repeats", o->repeats, "Timed repeats per probe (the median is reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([o, exit_code] {
#ifdef SERVESWEEP_HAVE_CUDA
    std::string report;
    const bool healthy = kernels::RunProbeReport({o->json, o->devices_only, o->repeats}, &report);
    fmt::print("{}", report);
    *exit_code = healthy ? kExitOk : kExitError;
#else
    fmt::print("{}\n",
               o->json
                   ? R"({"status":"no_gpu","detail":"built without CUDA","figures":[]})"
                   : "no_gpu (this build has no CUDA probes: nvcc was not found at build time)");
    *exit_code = kExitOk;
#endif
  });
}

}  // namespace servesweep::cli
