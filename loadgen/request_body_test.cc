// The direct body writer against the JSON-document path, byte for byte, over the settings and
// contents that reach it; and the contents that must take the document path.
#include "loadgen/request_body.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace servesweep::loadgen {
namespace {

TEST(RequestBody, TheDirectPathWritesTheBytesTheJsonDocumentDoes) {
  const std::vector<uint64_t> blocks = {7, 11};
  size_t cases = 0;
  for (const Api api : {Api::kCompletions, Api::kChatCompletions}) {
    for (const bool ignore_eos : {false, true}) {
      for (const double temperature : {0.0, 0.7, 1.0, 1e-7, 2.5}) {
        for (const char* model : {"m", "Qwen/Qwen3-0.6B", "a\"b\\c\u00e9\x01"}) {
          LoadSettings s;
          s.api = api;
          s.ignore_eos = ignore_eos;
          s.temperature = temperature;
          s.model = model;
          s.seed = 42;
          const RequestBodyWriter writer(s);
          std::string body = "left over from the request before";
          for (const uint32_t input_len : {1u, 4u, 16u, 700u}) {
            for (const uint32_t output_len : {1u, 128u, 4096u}) {
              RequestContent c;
              c.prompt_index = 1000u * input_len + output_len;
              c.input_len_tok = input_len;
              c.output_len_tok = output_len;
              if (input_len == 700) c.prefix = PromptPrefix{&blocks, 600};
              writer.Write(c, &body);
              ASSERT_EQ(body, writer.WriteThroughJson(c));
              ASSERT_FALSE(nlohmann::json::parse(body).is_discarded());
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 2u * 2 * 5 * 3 * 4 * 3);
}

TEST(RequestBody, PromptTextsMessagesAndTokenIdsGoThroughTheDocument) {
  LoadSettings s;
  s.model = "m";
  RequestContent text;
  text.has_prompt_text = true;
  text.prompt_text = "say \"hi\"\n";
  text.output_len_tok = 3;
  std::string body;
  RequestBodyWriter(s).Write(text, &body);
  EXPECT_EQ(nlohmann::json::parse(body)["prompt"], "say \"hi\"\n");

  s.token_id_prompts = true;
  RequestContent ids;
  ids.input_len_tok = 5;
  ids.output_len_tok = 3;
  RequestBodyWriter(s).Write(ids, &body);
  EXPECT_EQ(nlohmann::json::parse(body)["prompt"].size(), 5u);

  s.api = Api::kChatCompletions;
  RequestContent messages;
  messages.has_messages = true;
  messages.messages = nlohmann::json::array({{{"role", "system"}, {"content", "be brief"}}});
  messages.output_len_tok = 3;
  RequestBodyWriter(s).Write(messages, &body);
  EXPECT_EQ(nlohmann::json::parse(body)["messages"], messages.messages);
  EXPECT_EQ(nlohmann::json::parse(body)["max_completion_tokens"], 3);
}

}  // namespace
}  // namespace servesweep::loadgen
