// Fuzz target: the SSE splitter fed a response body in pieces whose sizes come from the input
// (an event may be split at any byte, even inside a CRLF). The events must not depend on how
// the body was split: feeding it whole gives the same events.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "loadgen/sse_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = static_cast<size_t>(data[0] % 16) + 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  servesweep::loadgen::SseParser split, whole;
  std::vector<servesweep::loadgen::SseEvent> split_events, whole_events;
  for (size_t at = 0; at < body.size(); at += piece) {
    split.Feed(body.substr(at, piece), &split_events);
  }
  split.Finish(&split_events);
  whole.Feed(body, &whole_events);
  whole.Finish(&whole_events);
  if (split_events.size() != whole_events.size()) std::abort();
  for (size_t i = 0; i < split_events.size(); ++i) {
    if (split_events[i].data != whole_events[i].data ||
        split_events[i].event != whole_events[i].event) {
      std::abort();
    }
  }
  return 0;
}
