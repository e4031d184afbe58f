// CUDA probes of one GPU: HBM bandwidth (copy and triad, bytes read plus written, several buffer
// sizes well above L2), dense GEMM throughput through cuBLAS (bf16, and fp8 through cuBLASLt
// where the GPU has fp8 tensor cores), and host<->device bandwidth with pinned memory. Every
// probe first checks its result against a host reference on random (never zero) data, then is
// timed with CUDA events after warm-up; the figure is the median of the repeats.
//
// Thread-safety: each call uses its own device buffers and stream; run one probe per GPU at a
// time (concurrent probes would measure each other).
#pragma once

#include <string>
#include <vector>

namespace servesweep::kernels {

struct ProbeFigure {
  std::string probe;  // "hbm.copy", "hbm.triad", "gemm.bf16", "gemm.fp8", "h2d", "d2h"
  int gpu = 0;
  std::string status;  // "ok", "failed" (wrong result or CUDA error), "skipped"
  double value = 0;    // median over repeats
  std::string unit;    // "GB/s" or "TFLOP/s"
  std::string detail;  // buffer size / matrix shape, or why it failed
};

struct GpuProbeSettings {
  int warmup = 3;
  int repeats = 10;
  int gemm_size = 8192;  // m = n = k
  bool fp8 = true;       // when the GPU supports it (sm_89+)
};

// All probes on `gpu`. Returns no figures when there is no such GPU (see QueryDevices()).
std::vector<ProbeFigure> RunGpuProbes(int gpu, const GpuProbeSettings& settings = {});

}  // namespace servesweep::kernels
