// The record's summary of a run's GPU samples (gpu<i>.util_pct, .memory_used_mib, .power_w,
// .sm_clock_mhz, as agent/gpu_telemetry.h samples them).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "scraper/metrics_scraper.h"

namespace servesweep::record {

// The record's summary of GPU samples: mean utilisation over GPUs and samples, highest memory
// used on any GPU, mean power per GPU, mean SM clock. NaN where no sample carried the figure.
struct GpuTelemetrySummary {
  double util_mean_pct;
  double memory_used_max_mib;
  double power_mean_w;
  double sm_clock_mean_mhz;
  uint32_t gpus = 0;
  size_t rows = 0;  // samples of utilisation (one per GPU per interval)
};
GpuTelemetrySummary SummarizeGpuSamples(const std::vector<scraper::ScrapedSample>& samples);

}  // namespace servesweep::record
