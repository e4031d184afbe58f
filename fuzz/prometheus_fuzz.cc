// Fuzz target: the Prometheus text exposition parser on an arbitrary /metrics body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "scraper/prometheus_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t skipped = 0;
  auto samples = servesweep::scraper::ParsePrometheusText(
      std::string_view(reinterpret_cast<const char*>(data), size), &skipped);
  (void)samples;
  return 0;
}
