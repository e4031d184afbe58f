// Decodes the `data:` payloads of one OpenAI-compatible streaming response (completions or
// chat completions) into what the load generator measures: did this chunk carry output, how
// many tokens, the usage numbers, the end marker, a server error.
//
// A chunk is output only when it carries non-empty generated text: completions
// `choices[0].text`; chat `delta.content`, `delta.reasoning_content` (reasoning models) or
// `delta.tool_calls`. A role-only first chat chunk, a finish_reason-only chunk and a
// usage-only chunk (`choices: []`) are not output, so TTFT is the time to real text. (vLLM's
// benchmark client counts any chunk with non-empty `choices`; see README.md.)
//
// Usage numbers are read as doubles (as a JSON parser does): negatives and non-numbers count 0,
// fractions truncate, values at or above 2^32 saturate at UINT32_MAX.
//
// Cost: one validating pass over the payload, no DOM and no allocation on the common path
// (bench/stream_decode_bench); garbage is rejected exactly as a full JSON parse rejects it.
// Most events of a stream differ from the one before only in their text: the decoder keeps the
// last payload it read in full (its shape) and what it said, and a payload that is that shape
// byte for byte except inside the output string's value, where it holds a plain valid string
// (json_cursor.h IsPlainStringBody), says the same with only that string's emptiness read
// anew: two compares and a scan of the text instead of a parse. Exact by construction: the
// bytes outside the value tokenize the same, so a full parse could not read anything else.
//
// Stateful (continuous usage deltas, the shape), so one decoder per stream (the shape may be
// kept across Reset(): it is a cache of a pure function); not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesweep::loadgen {

struct StreamChunk {
  bool done = false;       // `data: [DONE]`
  bool error = false;      // `{"error": ...}` or a payload that is not JSON
  std::string error_text;  // short, for RequestRecord::error
  bool output = false;     // carried generated text
  uint32_t tokens = 0;     // tokens in this chunk when output (1 unless the server says)
  bool has_usage = false;
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  // Prompt tokens served from the prefix cache, as the server says: usage.prompt_tokens_details
  // .cached_tokens (vLLM with --enable-prompt-tokens-details, SGLang with --enable-cache-report,
  // llama.cpp), else llama.cpp's timings.cache_n; -1 when this chunk says neither.
  int64_t cached_prompt_tokens = -1;
};

class OpenAiStreamDecoder {
 public:
  // What a payload that is not an error says about output and usage (choices[0] and usage).
  // Public only so that the decoder's reader can fill it.
  struct OutputFacts {
    bool usage_object = false;
    double prompt_tokens = 0;
    double completion_tokens = 0;
    double usage_cached_tokens = -1;    // usage.prompt_tokens_details.cached_tokens; -1: absent
    double timings_cached_tokens = -1;  // timings.cache_n (llama.cpp); -1: absent
    bool choice_object = false;         // choices[0] is an object
    bool text = false;                  // non-empty "text"
    bool delta_object = false;
    bool content = false, reasoning_content = false, reasoning = false, tool_calls = false;
    bool logprobs_object = false;
    size_t logprob_tokens = 0;   // "tokens" array size (0: absent, empty or not an array)
    size_t logprob_content = 0;  // "content" array size
  };

  // Both response shapes are recognised whichever endpoint was called: some servers answer
  // /v1/completions with chat-style deltas and the cost of checking is nil.
  StreamChunk Decode(std::string_view payload);

  // Per stream; the shape is kept.
  void Reset();

  // Payloads decoded from the shape, without a parse (for tests and benchmarks).
  uint64_t shape_hits() const { return shape_hits_; }

 private:
  // The last payload read in full that had an output string, and what it said.
  struct Shape {
    std::string doc;
    size_t value_begin = 0, value_end = 0;  // the output string's bytes (between its quotes)
    bool OutputFacts::*decides = nullptr;   // the fact that string's emptiness decides
    OutputFacts facts;
  };
  // `payload` is the shape but for a plain string in its value: *facts is what it says.
  bool MatchesShape(std::string_view payload, OutputFacts* facts) const;
  // The chunk a non-error payload makes, the continuous-usage state updated.
  StreamChunk FromFacts(const OutputFacts& f);

  // Continuous usage stats (vLLM `stream_options.continuous_usage_stats`) put a running
  // completion_tokens on every chunk; the per-chunk token count is then its increase. We only
  // trust that while every output chunk so far carried usage: a server that puts the final
  // usage on its last text chunk must not have all tokens credited to that one chunk.
  bool usage_on_every_output_chunk_ = true;
  uint32_t last_completion_tokens_ = 0;
  std::vector<char> stack_;  // the JSON cursor's scratch for nested values, kept for reuse
  Shape shape_;
  uint64_t shape_hits_ = 0;
};

}  // namespace servesweep::loadgen
