#include "perfmodel/probe_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace servesweep::perfmodel {
namespace {

// Per GPU, then the slowest GPU; 0 when no GPU measured it.
double Slowest(const std::map<int, double>& by_gpu) {
  double out = 0;
  for (const auto& [gpu, value] : by_gpu) out = out == 0 ? value : std::min(out, value);
  return out;
}

}  // namespace

Status ProbeFiguresFromReport(const std::string& report_json, ProbeFigures* out) {
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(report_json);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(
        fmt::format("expected a probe report (JSON), found invalid JSON: {}", e.what()));
  }
  if (!report.is_object() || !report.contains("figures") || !report["figures"].is_array()) {
    return Status::InvalidArgument(
        "expected a probe report (`servesweep probe --json`) with a 'figures' list, found none");
  }
  std::map<int, double> hbm, hbm_bytes, bf16, fp8, h2d;
  for (const auto& f : report["figures"]) {
    if (f.value("status", "") != "ok" || !f.contains("value")) continue;
    const std::string probe = f.value("probe", "");
    const int gpu = f.value("gpu", 0);
    const double value = f["value"].get<double>();
    if (probe == "hbm.copy") {
      // The largest buffer's figure: "1920 MiB per array".
      const double mib = std::strtod(f.value("detail", "0").c_str(), nullptr);
      if (mib >= hbm_bytes[gpu]) {
        hbm_bytes[gpu] = mib;
        hbm[gpu] = value * 1e9;
      }
    } else if (probe == "gemm.bf16") {
      bf16[gpu] = value * 1e12;
    } else if (probe == "gemm.fp8") {
      fp8[gpu] = value * 1e12;
    } else if (probe == "h2d") {
      h2d[gpu] = value * 1e9;
    }
  }
  ProbeFigures figures;
  figures.hbm_bytes_per_s = Slowest(hbm);
  figures.bf16_flops = Slowest(bf16);
  figures.fp8_flops = Slowest(fp8);
  figures.host_link_bytes_per_s = Slowest(h2d);
  if (figures.hbm_bytes_per_s == 0 && figures.bf16_flops == 0 && figures.fp8_flops == 0) {
    return Status::InvalidArgument(
        fmt::format("expected measured HBM or GEMM figures in the probe report, "
                    "found none (status '{}')",
                    report.value("status", "")));
  }
  *out = figures;
  return Status::Ok();
}

std::string HardwareProfileYaml(const HardwareProfile& hw, const std::string& comment) {
  std::string out;
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) out += "# " + line + "\n";
  auto link = [](const LinkProfile& l) {
    return fmt::format("{{busbw_gb_per_s: {}, latency_us: {}}}", l.busbw_bytes_per_s / 1e9,
                       static_cast<double>(l.latency_ns) / 1e3);
  };
  out += fmt::format("name: {}\n", hw.name);
  out += fmt::format("gpus_per_node: {}\n", hw.gpus_per_node);
  out += fmt::format("memory_gb: {}\n", hw.memory_bytes / 1e9);
  out += fmt::format("hbm_gb_per_s: {}\n", hw.hbm_bytes_per_s / 1e9);
  out += fmt::format("peak_bf16_tflops: {}\n", hw.peak_bf16_flops / 1e12);
  out += fmt::format("peak_fp8_tflops: {}\n", hw.peak_fp8_flops / 1e12);
  out += fmt::format("peak_fp4_tflops: {}\n", hw.peak_fp4_flops / 1e12);
  out += fmt::format("host_link_gb_per_s: {}\n", hw.host_link_bytes_per_s / 1e9);
  out += fmt::format("intra_node: {}\n", link(hw.intra_node));
  out += fmt::format("inter_node: {}\n", link(hw.inter_node));
  out += fmt::format("efficiency: {{flops: {}, hbm: {}, intra_node: {}, inter_node: {}}}\n",
                     hw.flops_efficiency, hw.hbm_efficiency, hw.intra_node_efficiency,
                     hw.inter_node_efficiency);
  return out;
}

}  // namespace servesweep::perfmodel
