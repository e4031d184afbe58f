#include "loadgen/openai_stream.h"

#include <gtest/gtest.h>

namespace servesweep::loadgen {
namespace {

TEST(OpenAiStream, CompletionsTextIsOutput) {
  OpenAiStreamDecoder d;
  StreamChunk c = d.Decode(R"({"choices":[{"index":0,"text":" hi"}]})");
  EXPECT_TRUE(c.output);
  EXPECT_EQ(c.tokens, 1u);
  EXPECT_FALSE(c.done);
  EXPECT_FALSE(c.error);
  EXPECT_FALSE(c.has_usage);
}

TEST(OpenAiStream, EmptyTextIsNotOutput) {
  OpenAiStreamDecoder d;
  EXPECT_FALSE(d.Decode(R"({"choices":[{"index":0,"text":""}]})").output);
  EXPECT_FALSE(d.Decode(R"({"choices":[{"index":0,"text":"","finish_reason":"length"}]})").output);
}

TEST(OpenAiStream, UsageOnlyChunkIsNotOutput) {
  OpenAiStreamDecoder d;
  StreamChunk c = d.Decode(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}})");
  EXPECT_FALSE(c.output);
  EXPECT_TRUE(c.has_usage);
  EXPECT_EQ(c.prompt_tokens, 12u);
  EXPECT_EQ(c.completion_tokens, 34u);
}

TEST(OpenAiStream, RoleOnlyChatChunkIsNotOutput) {
  OpenAiStreamDecoder d;
  EXPECT_FALSE(d.Decode(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})").output);
  EXPECT_FALSE(
      d.Decode(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})").output);
  EXPECT_FALSE(d.Decode(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})").output);
}

TEST(OpenAiStream, ChatContentReasoningAndToolCallsAreOutput) {
  OpenAiStreamDecoder d;
  EXPECT_TRUE(d.Decode(R"({"choices":[{"delta":{"content":"x"}}]})").output);
  EXPECT_TRUE(d.Decode(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})").output);
  EXPECT_TRUE(d.Decode(R"({"choices":[{"delta":{"reasoning":"hmm"}}]})").output);
  EXPECT_TRUE(
      d.Decode(
           R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]})")
          .output);
  EXPECT_FALSE(d.Decode(R"({"choices":[{"delta":{"tool_calls":[]}}]})").output);
}

TEST(OpenAiStream, Done) {
  OpenAiStreamDecoder d;
  EXPECT_TRUE(d.Decode("[DONE]").done);
  EXPECT_TRUE(d.Decode(" [DONE]\r").done);
  EXPECT_FALSE(d.Decode("[DONE]").output);
}

TEST(OpenAiStream, ErrorEvents) {
  OpenAiStreamDecoder d;
  StreamChunk c = d.Decode(R"({"error":{"message":"out of memory","code":500}})");
  EXPECT_TRUE(c.error);
  EXPECT_EQ(c.error_text, "server error: out of memory");
  c = d.Decode(R"({"object":"error","message":"bad","code":400})");
  EXPECT_TRUE(c.error);
  EXPECT_EQ(c.error_text, "server error: bad");
  c = d.Decode("{not json");
  EXPECT_TRUE(c.error);
  EXPECT_EQ(c.error_text, "bad stream payload: {not json");
  EXPECT_FALSE(d.Decode(R"({"error":null,"choices":[{"text":"a"}]})").error);
}

TEST(OpenAiStream, LogprobsGiveTokensPerChunk) {
  OpenAiStreamDecoder d;
  EXPECT_EQ(d.Decode(R"({"choices":[{"text":"ab","logprobs":{"tokens":["a","b","c"]}}]})").tokens,
            3u);
  EXPECT_EQ(
      d.Decode(R"({"choices":[{"delta":{"content":"ab"},"logprobs":{"content":[{},{}]}}]})").tokens,
      2u);
}

TEST(OpenAiStream, ContinuousUsageGivesTokensPerChunk) {
  OpenAiStreamDecoder d;
  auto chunk = [](int completion) {
    return R"({"choices":[{"text":"x"}],"usage":{"prompt_tokens":5,"completion_tokens":)" +
           std::to_string(completion) + "}}";
  };
  EXPECT_EQ(d.Decode(chunk(1)).tokens, 1u);
  EXPECT_EQ(d.Decode(chunk(4)).tokens, 3u);
  EXPECT_EQ(d.Decode(chunk(6)).tokens, 2u);
}

TEST(OpenAiStream, FinalUsageOnLastTextChunkIsNotCreditedToIt) {
  OpenAiStreamDecoder d;
  EXPECT_EQ(d.Decode(R"({"choices":[{"text":"a"}]})").tokens, 1u);
  StreamChunk c =
      d.Decode(R"({"choices":[{"text":"b"}],"usage":{"prompt_tokens":5,"completion_tokens":9}})");
  EXPECT_EQ(c.tokens, 1u);
  EXPECT_EQ(c.completion_tokens, 9u);
}

// Cached prompt tokens as vLLM and SGLang put them on the final usage chunk, and as llama.cpp
// does (both usage and timings, or timings alone on a chat stream without include_usage).
TEST(OpenAiStream, CachedPromptTokensFromUsageDetailsOrLlamacppTimings) {
  OpenAiStreamDecoder d;
  StreamChunk c = d.Decode(R"({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":8,)"
                           R"("prompt_tokens_details":{"cached_tokens":32}}})");
  EXPECT_EQ(c.cached_prompt_tokens, 32);
  c = d.Decode(R"({"choices":[{"text":"x","finish_reason":"length"}],"timings":{"cache_n":0,)"
               R"("prompt_n":40},"usage":{"prompt_tokens":40,"completion_tokens":8}})");
  EXPECT_EQ(c.cached_prompt_tokens, 0);
  EXPECT_TRUE(c.output);
  c = d.Decode(R"({"choices":[{"delta":{},"finish_reason":"stop"}],"timings":{"cache_n":17}})");
  EXPECT_EQ(c.cached_prompt_tokens, 17);
  // Said nowhere, or not a number: unknown, never a miss.
  EXPECT_EQ(d.Decode(R"({"choices":[{"text":"y"}]})").cached_prompt_tokens, -1);
  EXPECT_EQ(d.Decode(R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1,)"
                     R"("prompt_tokens_details":null}})")
                .cached_prompt_tokens,
            -1);
  EXPECT_EQ(d.Decode(R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1,)"
                     R"("prompt_tokens_details":{"cached_tokens":"3"}}})")
                .cached_prompt_tokens,
            -1);
}

}  // namespace
}  // namespace servesweep::loadgen
