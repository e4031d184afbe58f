// Fuzz target: the trace readers (Azure CSV, Mooncake JSONL) on an arbitrary file; the first
// byte picks the format. Also the timestamp parser on the same bytes.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "workload/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  static const std::string path = "/tmp/servesweep-trace-fuzz-" + std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }
  const auto format = data[0] % 2 == 0 ? servesweep::workload::TraceFormat::kAzureCsv
                                       : servesweep::workload::TraceFormat::kMooncakeJsonl;
  std::vector<servesweep::workload::TraceRequest> requests;
  (void)servesweep::workload::ReadTrace(path, format, 1000, &requests);
  int64_t ns = 0;
  (void)servesweep::workload::ParseTimestampNs(text, &ns);
  return 0;
}
