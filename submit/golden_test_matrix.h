// Shared by the golden-render tests of `servesweep submit`: the matrix they render, and where
// the expected files live (tests/golden/).
#pragma once

#include "testing/process_helpers.h"

namespace servesweep::submit {

using testing::ReadSourceFile;

inline constexpr const char* kGoldenMatrix = R"(name: golden
engine: sim
model: m
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
axes:
  layout: [{tp: 8}, {tp: 16}]
)";

}  // namespace servesweep::submit
