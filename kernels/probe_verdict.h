// The verdict on a node's probe figures: each compared with what its GPU model should reach and
// with the node's other GPUs of the same model, so a slow GPU or link (which gates every TP
// group it joins) is flagged before a sweep spends hours on it.
//
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace servesweep::kernels {

// Published peak figures of a GPU model and the fraction of them a healthy GPU reaches in our
// probes (streaming kernels reach ~90% of HBM peak; a large dense GEMM ~70-80% of peak FLOP/s).
struct GpuSpec {
  std::string model_substring;  // matched against the device name, e.g. "H200"
  double hbm_gbps;              // HBM bandwidth, GB/s
  double bf16_dense_tflops;
  double fp8_dense_tflops;     // 0 when the model has no fp8 tensor cores
  double host_to_device_gbps;  // PCIe/C2C link, one direction
};

const std::vector<GpuSpec>& GpuSpecs();
std::optional<GpuSpec> SpecFor(const std::string& device_name);

struct Figure {
  std::string probe;  // "hbm.triad", "gemm.bf16", "h2d", ...
  int gpu = 0;
  double value = 0;  // in the probe's unit (GB/s or TFLOP/s)
};

enum class Health { kOk, kBelowSpec, kOutlier };
const char* HealthName(Health health);

struct Verdict {
  Figure figure;
  double expected = 0;     // achievable figure for the model; 0 when unknown
  double of_expected = 0;  // value / expected
  double of_peers = 0;     // value / median of the node's GPUs for this probe
  Health health = Health::kOk;
  std::string reason;
};

struct VerdictSettings {
  double min_of_expected = 0.8;  // below this fraction of the achievable figure: below spec
  double min_of_peers = 0.9;     // below this fraction of the node's median: outlier
};

// The achievable figure of `probe` on `spec` (peak x typical efficiency); 0 when not known.
double ExpectedFigure(const GpuSpec& spec, const std::string& probe);

std::vector<Verdict> Judge(const std::string& device_name, const std::vector<Figure>& figures,
                           const VerdictSettings& settings = {});

// True when every verdict is ok.
bool Healthy(const std::vector<Verdict>& verdicts);

}  // namespace servesweep::kernels
