#include "record/gpu_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

namespace servesweep::record {

GpuTelemetrySummary SummarizeGpuSamples(const std::vector<scraper::ScrapedSample>& samples) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  GpuTelemetrySummary summary{nan, nan, nan, nan};
  std::set<std::string> gpus;
  double util_sum = 0, power_sum = 0, clock_sum = 0;
  size_t util_n = 0, power_n = 0, clock_n = 0;
  for (const auto& s : samples) {
    const size_t dot = s.signal.find('.');
    if (s.signal.rfind("gpu", 0) != 0 || dot == std::string::npos) continue;
    gpus.insert(s.signal.substr(0, dot));
    const std::string figure = s.signal.substr(dot + 1);
    if (figure == "util_pct") {
      util_sum += s.value;
      ++util_n;
    } else if (figure == "power_w") {
      power_sum += s.value;
      ++power_n;
    } else if (figure == "sm_clock_mhz") {
      clock_sum += s.value;
      ++clock_n;
    } else if (figure == "memory_used_mib") {
      summary.memory_used_max_mib = std::isnan(summary.memory_used_max_mib)
                                        ? s.value
                                        : std::max(summary.memory_used_max_mib, s.value);
    }
  }
  if (util_n > 0) summary.util_mean_pct = util_sum / static_cast<double>(util_n);
  if (power_n > 0) summary.power_mean_w = power_sum / static_cast<double>(power_n);
  if (clock_n > 0) summary.sm_clock_mean_mhz = clock_sum / static_cast<double>(clock_n);
  summary.gpus = static_cast<uint32_t>(gpus.size());
  summary.rows = util_n;
  return summary;
}

}  // namespace servesweep::record
