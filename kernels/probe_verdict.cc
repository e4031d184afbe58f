#include "kernels/probe_verdict.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>

namespace servesweep::kernels {
namespace {

// Fractions of peak a healthy GPU reaches in these probes.
constexpr double kHbmEfficiency = 0.90;
constexpr double kGemmEfficiency = 0.70;
// fp8 GEMMs at probe sizes reach a smaller fraction of their (doubled) peak than bf16 does.
constexpr double kFp8GemmEfficiency = 0.55;
constexpr double kLinkEfficiency = 0.80;

// printf-style formatting: kernels/ builds with the CUDA toolkit alone (probes-only builds).
std::string Format(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return buffer;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

const std::vector<GpuSpec>& GpuSpecs() {
  // Datasheet figures (dense, no sparsity). Host link: PCIe 5 x16 (~64 GB/s) or NVLink-C2C.
  static const std::vector<GpuSpec> specs = {
      {"H100", 3350, 989, 1979, 64},
      {"H100 PCIe", 2000, 756, 1513, 64},
      {"H200", 4800, 989, 1979, 64},
      {"GH200", 4000, 989, 1979, 450},  // HBM3 96 GB; the 144 GB HBM3e part reaches 4900
      {"B200", 8000, 2250, 4500, 64},
      {"GB300", 8000, 2500, 5000, 450},
  };
  return specs;
}

std::optional<GpuSpec> SpecFor(const std::string& device_name) {
  // Longest match first, so "GB300" is not taken for another model's substring.
  std::optional<GpuSpec> best;
  for (const auto& spec : GpuSpecs()) {
    if (device_name.find(spec.model_substring) == std::string::npos) continue;
    if (!best || spec.model_substring.size() > best->model_substring.size()) best = spec;
  }
  return best;
}

const char* HealthName(Health health) {
  switch (health) {
    case Health::kOk:
      return "ok";
    case Health::kBelowSpec:
      return "below_spec";
    case Health::kOutlier:
      return "outlier";
  }
  return "?";
}

double ExpectedFigure(const GpuSpec& spec, const std::string& probe) {
  if (probe.rfind("hbm.", 0) == 0) return spec.hbm_gbps * kHbmEfficiency;
  if (probe == "gemm.bf16") return spec.bf16_dense_tflops * kGemmEfficiency;
  if (probe == "gemm.fp8") return spec.fp8_dense_tflops * kFp8GemmEfficiency;
  if (probe == "h2d" || probe == "d2h") return spec.host_to_device_gbps * kLinkEfficiency;
  return 0;
}

std::vector<Verdict> Judge(const std::string& device_name, const std::vector<Figure>& figures,
                           const VerdictSettings& settings) {
  std::map<std::string, std::vector<double>> by_probe;
  for (const auto& f : figures) by_probe[f.probe].push_back(f.value);
  const auto spec = SpecFor(device_name);
  std::vector<Verdict> verdicts;
  for (const auto& f : figures) {
    Verdict v;
    v.figure = f;
    v.expected = spec ? ExpectedFigure(*spec, f.probe) : 0;
    v.of_expected = v.expected > 0 ? f.value / v.expected : 0;
    const double median = Median(by_probe[f.probe]);
    v.of_peers = median > 0 ? f.value / median : 0;
    if (v.expected > 0 && v.of_expected < settings.min_of_expected) {
      v.health = Health::kBelowSpec;
      v.reason = Format(
          "%s on GPU %d: %.1f, expected at least %.1f (%.0f%% of the %.1f a healthy %s "
          "reaches)",
          f.probe.c_str(), f.gpu, f.value, v.expected * settings.min_of_expected,
          settings.min_of_expected * 100, v.expected, spec->model_substring.c_str());
    } else if (by_probe[f.probe].size() > 1 && v.of_peers < settings.min_of_peers) {
      v.health = Health::kOutlier;
      v.reason = Format("%s on GPU %d: %.1f, %.0f%% of the node's median %.1f", f.probe.c_str(),
                        f.gpu, f.value, v.of_peers * 100, median);
    }
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

bool Healthy(const std::vector<Verdict>& verdicts) {
  return std::all_of(verdicts.begin(), verdicts.end(),
                     [](const Verdict& v) { return v.health == Health::kOk; });
}

}  // namespace servesweep::kernels
