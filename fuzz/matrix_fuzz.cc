// Fuzz target: matrix expansion and validation of an arbitrary YAML text. Any input gives a
// Status (an error names the problem); none crashes or hangs. Inputs are capped at 4 KB so the
// fuzzer spends its time on structure, not on huge documents.
#include <cstddef>
#include <cstdint>
#include <string>

#include "matrix/matrix_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  servesweep::matrix::LoadedMatrix matrix;
  (void)servesweep::matrix::ExpandMatrix("fuzz.yaml", text, &matrix);
  return 0;
}
