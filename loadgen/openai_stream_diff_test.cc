// Differential test: the fast decoder (JsonCursor, no DOM) and the reference decoder (a full
// nlohmann::json parse) must agree on every field of every chunk: hand-picked edge cases, the
// SSE and stream fuzz corpora, and seeded random mutations of real payloads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "loadgen/openai_stream.h"
#include "loadgen/sse_parser.h"
#include "testing/openai_stream_reference.h"

namespace servesweep::loadgen {
namespace {

using testing::ReferenceStreamDecoder;
using testing::SameChunk;

std::string Describe(const StreamChunk& c) {
  return "done=" + std::to_string(c.done) + " error=" + std::to_string(c.error) + " text='" +
         c.error_text + "' output=" + std::to_string(c.output) +
         " tokens=" + std::to_string(c.tokens) + " usage=" + std::to_string(c.has_usage) + " " +
         std::to_string(c.prompt_tokens) + "/" + std::to_string(c.completion_tokens);
}

// Decodes the payloads in order with both decoders (they are stateful) and compares each.
void ExpectAgree(const std::vector<std::string>& payloads) {
  OpenAiStreamDecoder fast;
  ReferenceStreamDecoder reference;
  for (const std::string& p : payloads) {
    const StreamChunk a = fast.Decode(p);
    const StreamChunk b = reference.Decode(p);
    ASSERT_TRUE(SameChunk(a, b)) << "payload: " << p << "\nfast:      " << Describe(a)
                                 << "\nreference: " << Describe(b);
  }
}

const std::vector<std::string> kEdgeCases = {
    // Shapes servers send.
    R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":null}]})",
    R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null}]})",
    R"({"choices":[{"delta":{"reasoning_content":"r"}}]})",
    R"({"choices":[{"delta":{"reasoning":"r"}}]})",
    R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\": [1, 2]}"}}]}}]})",
    R"({"choices":[{"delta":{"tool_calls":[]}}]})",
    R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}})",
    R"({"choices":[{"text":"x"}],"usage":{"prompt_tokens":5,"completion_tokens":3}})",
    R"({"choices":[{"text":"ab","logprobs":{"tokens":["a","b"],"token_logprobs":[-0.1,-2.5e-05]}}]})",
    R"({"choices":[{"delta":{"content":"ab"},"logprobs":{"content":[{"token":"a","logprob":-1E-3},{}]}}]})",
    R"({"choices":[{"text":"ab","logprobs":{"tokens":[],"content":[1,2,3]}}]})",
    R"({"choices":[{"text":"ab","logprobs":{"tokens":"no","content":[1]}}]})",
    // Errors.
    R"({"error":{"message":"out of memory","code":500}})",
    R"({"error":{"message":"","code":500}})",
    R"({"error":{"message":7}})",
    R"({"error":"plain string"})",
    R"({"error":""})",
    R"({"error":12})",
    R"({"error":[]})",
    R"({"error":null,"choices":[{"text":"a"}]})",
    R"({"object":"error","message":"bad","code":400})",
    R"({"object":"error"})",
    R"({"object":"error","message":""})",
    R"({"object":"\u0065rror","message":"esc\u00e9\ud83d\ude00\n"})",
    R"({"object":"error","error":null})",
    R"({"object":"errors","message":"x"})",
    R"({"error":{"message":"m\"q\\\/\b\f\n\r\t"}})",
    // Duplicate keys: the last one wins.
    R"({"choices":[{"text":"a"}],"choices":[]})",
    R"({"choices":[],"choices":[{"text":"a"}]})",
    R"({"choices":[{"text":"a","text":""}]})",
    R"({"choices":[{"text":"","text":"b"}]})",
    R"({"choices":[{"delta":{"content":"a"},"delta":{"role":"x"}}]})",
    R"({"usage":{"prompt_tokens":5},"usage":null,"choices":[{"text":"a"}]})",
    R"({"usage":{"prompt_tokens":5,"prompt_tokens":"x"}})",
    R"({"error":{"message":"a"},"error":null})",
    R"({"error":null,"error":{"message":"b"}})",
    R"({"choices":[{"text":"a","logprobs":{"tokens":[1,2]},"logprobs":null}]})",
    // Escaped keys decode before they are compared.
    R"({"ch\u006fices":[{"t\u0065xt":"a"}]})",
    R"({"choices":[{"\u0064elta":{"\u0063ontent":"\u0000"}}]})",
    R"({"choices":[{"text":"\u0000"}]})",
    // Numbers.
    R"({"usage":{"prompt_tokens":1.9e1,"completion_tokens":-3}})",
    R"({"usage":{"prompt_tokens":4294967295,"completion_tokens":4294967296}})",
    R"({"usage":{"prompt_tokens":1e300,"completion_tokens":123456789012345678901234567890}})",
    R"({"usage":{"prompt_tokens":"5","completion_tokens":null}})",
    R"({"usage":{"prompt_tokens":-0,"completion_tokens":0.5}})",
    R"({"usage":{"prompt_tokens":1e-400}})",
    R"({"created":1e400})",
    R"({"created":-1E+309})",
    R"({"created":0.0000000000000000000000000000000000001e310})",
    R"({"created":99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999})",
    R"({"created":01})",
    R"({"created":1.})",
    R"({"created":.5})",
    R"({"created":-})",
    R"({"created":1e})",
    R"({"created":+1})",
    // Not objects, and garbage.
    "[1,2]",
    "\"str\"",
    "42",
    "null",
    "{not json",
    "{\"a\":1,}",
    "{\"a\":[1,]}",
    "{\"a\" 1}",
    "{\"a\":1}}",
    "{\"a\":1} x",
    "{\"a\":tru}",
    "{\"a\":nul}",
    "{'a':1}",
    "{\"a\":\"\x01\"}",
    "{\"a\":\"\xff\"}",
    "{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
    "{\"a\":\"\xc0\x80\"}",
    "{\"a\":\"\xed\xa0\x80\"}",
    "{\"a\":\"\xf4\x90\x80\x80\"}",
    "{\"a\":\"\xe0\x9f\xbf\"}",
    "{\"a\":\"\\ud800\"}",
    "{\"a\":\"\\udc00\"}",
    "{\"a\":\"\\ud800\\u0041\"}",
    "{\"a\":\"\\x\"}",
    "{\"a\":\"\\u12G4\"}",
    "\xef\xbb\xbf{\"choices\":[{\"text\":\"bom\"}]}",
    "\xef\xbb{}",
    "\xef\xbb\xbf",
    "{} // comment",
    "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]]]]]"
    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
    std::string("{\"a\":\"x\0y\"}", 12),
    std::string("{\"a\":1}\0", 8),
    std::string("{\"choices\":[{\"text\":\"a\"}]}\0garbage", 34),
    std::string("{\"a\":\0}", 7),
    std::string("\0", 1),
    // Padding, [DONE], empty.
    " [DONE]\r",
    "[DONE] x",
    "",
    "  \t",
    " {\"choices\":[{\"text\":\"pad\"}]}\n",
};

TEST(OpenAiStreamDiff, EdgeCases) {
  for (const std::string& p : kEdgeCases) ExpectAgree({p});
}

TEST(OpenAiStreamDiff, EdgeCasesInOneStream) {
  // The decoders are stateful (continuous usage): run every case through one pair too.
  ExpectAgree(kEdgeCases);
}

TEST(OpenAiStreamDiff, ContinuousUsageSequences) {
  ExpectAgree({R"({"choices":[{"text":"a"}],"usage":{"completion_tokens":1}})",
               R"({"choices":[{"text":"b"}],"usage":{"completion_tokens":4}})",
               R"({"choices":[],"usage":{"completion_tokens":4}})",
               R"({"choices":[{"text":"c"}],"usage":{"completion_tokens":4}})",
               R"({"choices":[{"text":"d"}]})",
               R"({"choices":[{"text":"e"}],"usage":{"completion_tokens":9}})"});
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The SSE fuzz seeds are response bodies (after one byte that picks a piece size): their events
// are the payloads. The stream fuzz seeds are payloads, one per line.
TEST(OpenAiStreamDiff, FuzzCorpora) {
  const std::filesystem::path fuzz = std::filesystem::path(SERVESWEEP_SOURCE_DIR) / "fuzz";
  size_t files = 0;
  for (const char* dir : {"corpus/sse", "regressions/sse"}) {
    if (!std::filesystem::exists(fuzz / dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(fuzz / dir)) {
      const std::string bytes = ReadFile(entry.path());
      if (bytes.empty()) continue;
      SseParser parser;
      std::vector<SseEvent> events;
      parser.Feed(std::string_view(bytes).substr(1), &events);
      parser.Finish(&events);
      std::vector<std::string> payloads;
      for (const auto& e : events) payloads.push_back(e.data);
      SCOPED_TRACE(entry.path().string());
      ExpectAgree(payloads);
      ++files;
    }
  }
  for (const char* dir : {"corpus/stream", "regressions/stream"}) {
    if (!std::filesystem::exists(fuzz / dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(fuzz / dir)) {
      const std::string bytes = ReadFile(entry.path());
      std::vector<std::string> payloads;
      size_t start = 0;
      while (start <= bytes.size()) {
        size_t nl = bytes.find('\n', start);
        if (nl == std::string::npos) nl = bytes.size();
        payloads.push_back(bytes.substr(start, nl - start));
        start = nl + 1;
      }
      SCOPED_TRACE(entry.path().string());
      ExpectAgree(payloads);
      ++files;
    }
  }
  EXPECT_GE(files, 6u);  // a missing corpus must not pass silently
}

// Seeded mutations of valid payloads: byte replacements biased to JSON's structural bytes,
// insertions, deletions, truncations, duplicated slices.
TEST(OpenAiStreamDiff, RandomMutations) {
  static const char kAlphabet[] = "{}[]\":,\\ -+.eE0123456789tfnulasrbu\x01\x7f\xc3\xa9\xff\xed";
  std::mt19937_64 rng(20261130);
  OpenAiStreamDecoder fast;
  ReferenceStreamDecoder reference;
  size_t errors = 0, outputs = 0;
  for (int trial = 0; trial < 100'000; ++trial) {
    std::string p = kEdgeCases[rng() % 30];  // the well-formed server shapes
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !p.empty(); ++e) {
      const size_t at = rng() % p.size();
      const char c = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
      switch (rng() % 5) {
        case 0:
          p[at] = c;
          break;
        case 1:
          p.insert(p.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        case 2:
          p.erase(at, 1);
          break;
        case 3:
          p.resize(at);
          break;
        default: {
          const size_t len = std::min<size_t>(rng() % 12, p.size() - at);
          p.insert(rng() % p.size(), p.substr(at, len));
        }
      }
    }
    const StreamChunk a = fast.Decode(p);
    const StreamChunk b = reference.Decode(p);
    ASSERT_TRUE(SameChunk(a, b)) << "trial " << trial << " payload: " << p
                                 << "\nfast:      " << Describe(a)
                                 << "\nreference: " << Describe(b);
    errors += a.error;
    outputs += a.output;
  }
  // Both kinds of outcome must be well represented, or the test proves little.
  EXPECT_GT(errors, 10'000u);
  EXPECT_GT(outputs, 1'000u);
}

// The shape kept from the last full read: payloads that differ from a server's template only in
// the output string (texts with quotes, escapes, control bytes, valid and broken UTF-8), and
// now and then one byte anywhere else, through one decoder pair. The shape must be used (or the
// test proves nothing about it) and never say what a full parse would not.
TEST(OpenAiStreamDiff, PayloadsThatDifferOnlyInTheirTextAgreeThroughTheShape) {
  const std::pair<std::string, std::string> templates[] = {
      {R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":")",
       R"(","logprobs":null,"finish_reason":null}]})"},
      {R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":")",
       R"("},"logprobs":null}]})"},
      {R"({"choices":[{"delta":{"reasoning_content":")",
       R"("}}],"usage":{"completion_tokens":3}})"},
      {R"({"choices":[{"text":"a","text":")", R"("}]})"},
      {R"({"choices":[{"text":")", R"("}],"choices":[]})"},
  };
  std::mt19937_64 rng(20261202);
  static const char kPlain[] = "ab u}],:{";
  static const char kSpecial[] = "\"\\\x01\x1f\x7f\xc3\xa9\xe2\x82\xac\xff\xed\xa0\x80\xf0\x9f\x98";
  auto pick = [&rng] {
    return rng() % 4 != 0 ? kPlain[rng() % (sizeof(kPlain) - 1)]
                          : kSpecial[rng() % (sizeof(kSpecial) - 1)];
  };
  OpenAiStreamDecoder fast;
  ReferenceStreamDecoder reference;
  size_t outputs = 0, errors = 0;
  constexpr int kTrials = 50'000;
  for (int trial = 0; trial < kTrials; ++trial) {
    const auto& [head, tail] = templates[(trial / 50) % std::size(templates)];
    std::string text;
    for (size_t n = rng() % 7; n > 0; --n) text.push_back(pick());
    std::string p = head + text + tail;
    if (rng() % 8 == 0) p[rng() % p.size()] = pick();
    const StreamChunk a = fast.Decode(p);
    const StreamChunk b = reference.Decode(p);
    ASSERT_TRUE(SameChunk(a, b)) << "trial " << trial << " payload: " << p
                                 << "\nfast:      " << Describe(a)
                                 << "\nreference: " << Describe(b);
    outputs += a.output;
    errors += a.error;
  }
  EXPECT_GT(fast.shape_hits(), kTrials / 4u);
  EXPECT_GT(outputs, kTrials / 4u);
  EXPECT_GT(errors, kTrials / 10u);
}

}  // namespace
}  // namespace servesweep::loadgen
