// `servesweep probe`: this node's hardware probes (CUDA devices, HBM, GEMM, host link), each
// judged against the GPU model's expected figure and the node's other GPUs. Says "no_gpu"
// cleanly where there is none. `--hardware-profile FILE` turns the figures (measured now, or a
// saved report given with --from) into a performance-model hardware profile.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "common/clock.h"
#include "perfmodel/probe_profile.h"
#ifdef SERVESWEEP_HAVE_CUDA
#include "kernels/probe_report.h"
#endif

namespace servesweep::cli {
namespace {

int WriteHardwareProfile(const std::string& out_path, const std::string& base_name,
                         const std::string& from_report, int repeats) {
  std::string report;
  if (!from_report.empty()) {
    std::ifstream in(from_report);
    if (!in) {
      spdlog::error("{}: expected a readable probe report, found none", from_report);
      return kExitError;
    }
    std::stringstream text;
    text << in.rdbuf();
    report = text.str();
  } else {
#ifdef SERVESWEEP_HAVE_CUDA
    kernels::RunProbeReport({true, false, repeats}, &report);
#else
    (void)repeats;
    spdlog::error("this build has no CUDA probes: measure on a GPU node, or pass --from REPORT");
    return kExitError;
#endif
  }
  perfmodel::ProbeFigures figures;
  perfmodel::HardwareProfile base;
  Status s = perfmodel::ProbeFiguresFromReport(report, &figures);
  if (s.ok()) s = perfmodel::LoadHardwareProfile(base_name, &base);
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  const perfmodel::HardwareProfile hw = perfmodel::HardwareFromProbes(base, figures);
  const std::string comment = fmt::format(
      "Measured by servesweep probe ({}) at unix ms {}, over the '{}' profile:\n"
      "HBM {:.0f} GB/s, bf16 {:.0f} TFLOP/s, fp8 {:.0f} TFLOP/s, host link {:.1f} GB/s (0 = "
      "not measured; the base's figure is kept).",
      from_report.empty() ? "this node" : from_report, UnixNowMs(), base_name,
      figures.hbm_bytes_per_s / 1e9, figures.bf16_flops / 1e12, figures.fp8_flops / 1e12,
      figures.host_link_bytes_per_s / 1e9);
  std::ofstream out(out_path, std::ios::trunc);
  out << perfmodel::HardwareProfileYaml(hw, comment);
  out.close();
  if (!out) {
    spdlog::error("{}: cannot write", out_path);
    return kExitError;
  }
  fmt::print("hardware profile: {} (use it as sim.hardware: {})\n", out_path, out_path);
  return kExitOk;
}

}  // namespace

void AddProbeCommand(CLI::App& app, int* exit_code) {
  struct Options {
    bool json = false;
    bool devices_only = false;
    int repeats = 10;
    std::string profile_out;
    std::string profile_base = "h200";
    std::string from_report;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("probe", "Probe this node's GPUs (HBM, GEMM, host link)");
  cmd->add_flag("--json", o->json, "One JSON document instead of tables");
  cmd->add_flag("--devices-only", o->devices_only, "List the devices; run no probe");
  cmd->add_option("--repeats", o->repeats, "Timed repeats per probe (the median is reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* profile = cmd->add_option(
      "--hardware-profile", o->profile_out,
      "Write the measured figures as a hardware profile (YAML) for `plan --simulate` and sim");
  cmd->add_option("--base", o->profile_base,
                  "Profile whose unmeasured figures (memory, links) the new one keeps")
      ->capture_default_str()
      ->needs(profile);
  cmd->add_option("--from", o->from_report, "A saved `servesweep probe --json` report to convert")
      ->needs(profile);
  cmd->callback([o, exit_code] {
    if (!o->profile_out.empty()) {
      *exit_code =
          WriteHardwareProfile(o->profile_out, o->profile_base, o->from_report, o->repeats);
      return;
    }
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
