// Google Benchmark: the load generator's per-event cost on its hot path, the SSE splitter plus
// the stream decoder, over a 128-event completion body (vLLM's chunk shape, then usage and
// [DONE]) fed in 16 KB reads as libcurl hands them over. The fast decoder (JsonCursor) beside
// the reference decoder (a full nlohmann::json parse per event, the decoder before it).
// Reported per event (items_per_second), the body's bytes per second too.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "loadgen/openai_stream.h"
#include "loadgen/sse_parser.h"
#include "testing/openai_stream_reference.h"

namespace {

using servesweep::loadgen::OpenAiStreamDecoder;
using servesweep::loadgen::SseParser;
using servesweep::loadgen::SseSink;
using servesweep::loadgen::StreamChunk;

constexpr int kEvents = 128;
constexpr size_t kReadBytes = 16 * 1024;  // libcurl's largest write-callback piece

std::string CompletionBody() {
  std::string body;
  for (int i = 0; i < kEvents; ++i) {
    body += fmt::format(
        "data: {{\"id\":\"cmpl-0123456789abcdef\",\"object\":\"text_completion\",\"created\":"
        "1764460800,\"model\":\"m\",\"choices\":[{{\"index\":0,\"text\":\" tok{}\",\"logprobs\":"
        "null,\"finish_reason\":{},\"stop_reason\":null}}]}}\n\n",
        i, i + 1 == kEvents ? "\"length\"" : "null");
  }
  body +=
      "data: {\"id\":\"cmpl-0123456789abcdef\",\"object\":\"text_completion\",\"created\":"
      "1764460800,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":128,\"total_tokens\":"
      "256,\"completion_tokens\":128}}\n\n";
  body += "data: [DONE]\n\n";
  return body;
}

template <typename Decoder>
struct CountingSink final : SseSink {
  Decoder decoder;
  uint64_t outputs = 0;
  void OnEvent(std::string_view, std::string_view data) override {
    const StreamChunk c = decoder.Decode(data);
    outputs += c.output;
  }
};

template <typename Decoder>
void BM_SplitAndDecode(benchmark::State& state) {
  const std::string body = CompletionBody();
  SseParser parser;
  CountingSink<Decoder> sink;
  for (auto _ : state) {
    parser.Reset();
    for (size_t at = 0; at < body.size(); at += kReadBytes) {
      parser.Feed(std::string_view(body).substr(at, kReadBytes), &sink);
    }
    parser.Finish(&sink);
  }
  if (sink.outputs != static_cast<uint64_t>(state.iterations()) * kEvents) {
    state.SkipWithError("wrong number of output chunks");
  }
  state.SetItemsProcessed(state.iterations() * (kEvents + 2));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
}

struct NoDecoder {
  StreamChunk Decode(std::string_view data) {
    StreamChunk c;
    c.output = data.size() > 2 && data.substr(data.size() - 2) == "]}";
    return c;
  }
};

BENCHMARK(BM_SplitAndDecode<OpenAiStreamDecoder>)->Name("split+decode/fast");
BENCHMARK(BM_SplitAndDecode<servesweep::testing::ReferenceStreamDecoder>)
    ->Name("split+decode/nlohmann");
BENCHMARK(BM_SplitAndDecode<NoDecoder>)->Name("split only");

}  // namespace

BENCHMARK_MAIN();
