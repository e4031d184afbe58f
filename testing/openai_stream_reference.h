// The stream decoder's semantics written the plain way, on a full nlohmann::json parse: the
// oracle the fast decoder (openai_stream.cc) is checked against in the differential test and
// the stream fuzz target. Test-only; it is the decoder servesweep shipped before the fast one,
// with two fixes both sides share: usage numbers at or above 2^32 saturate (the old cast was
// undefined), and {"object":"error"} without an "error" member reports the payload (the old
// code dereferenced a missing member).
#pragma once

#include <string_view>

#include "loadgen/openai_stream.h"

namespace servesweep::testing {

class ReferenceStreamDecoder {
 public:
  loadgen::StreamChunk Decode(std::string_view payload);

 private:
  bool usage_on_every_output_chunk_ = true;
  uint32_t last_completion_tokens_ = 0;
};

// Every field equal.
bool SameChunk(const loadgen::StreamChunk& a, const loadgen::StreamChunk& b);

}  // namespace servesweep::testing
