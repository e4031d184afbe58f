// Fuzz target: the stream decoder (loadgen/openai_stream.cc, a hand-written validating
// scanner) against the reference decoder on a full nlohmann::json parse. The input is a stream
// of payloads, one per line (the decoders are stateful); every field of every chunk must agree.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "loadgen/openai_stream.h"
#include "testing/openai_stream_reference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  servesweep::loadgen::OpenAiStreamDecoder fast;
  servesweep::testing::ReferenceStreamDecoder reference;
  size_t start = 0;
  while (start <= input.size()) {
    size_t nl = input.find('\n', start);
    if (nl == std::string_view::npos) nl = input.size();
    const std::string_view payload = input.substr(start, nl - start);
    if (!servesweep::testing::SameChunk(fast.Decode(payload), reference.Decode(payload))) {
      std::abort();
    }
    start = nl + 1;
  }
  return 0;
}
