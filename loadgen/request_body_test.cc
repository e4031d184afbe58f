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

// A LoRA adapter as each engine takes it, on both paths: the model field (vLLM, SGLang's
// "base:adapter"), or llama.cpp's lora list (its own adapter at 1, none listed at 0; a base
// request lists every adapter at 0, else llama.cpp would apply them all).
TEST(RequestBody, AdaptersAreNamedAsTheEngineTakesThem) {
  for (const Api api : {Api::kCompletions, Api::kChatCompletions}) {
    LoadSettings s;
    s.api = api;
    s.model = "base";
    s.adapters = {{"sql", "base:sql", -1}, {"chat", "chat", -1}};
    const RequestBodyWriter by_model(s);
    RequestContent c;
    c.input_len_tok = 8;
    c.output_len_tok = 4;
    std::string body;
    for (const int32_t adapter : {-1, 0, 1}) {
      c.adapter = adapter;
      by_model.Write(c, &body);
      ASSERT_EQ(body, by_model.WriteThroughJson(c));
      const auto json = nlohmann::json::parse(body);
      EXPECT_EQ(json["model"], adapter < 0 ? "base" : adapter == 0 ? "base:sql" : "chat");
      EXPECT_FALSE(json.contains("lora"));
    }
    s.adapters = {{"a", "base", 0}, {"b", "base", 1}};
    const RequestBodyWriter by_lora(s);
    c.adapter = 1;
    by_lora.Write(c, &body);
    ASSERT_EQ(body, by_lora.WriteThroughJson(c));
    auto json = nlohmann::json::parse(body);
    EXPECT_EQ(json["model"], "base");
    EXPECT_EQ(json["lora"], nlohmann::json::parse(R"([{"id": 1, "scale": 1.0}])"));
    c.adapter = -1;
    by_lora.Write(c, &body);
    ASSERT_EQ(body, by_lora.WriteThroughJson(c));
    json = nlohmann::json::parse(body);
    EXPECT_EQ(json["lora"],
              nlohmann::json::parse(R"([{"id": 0, "scale": 0.0}, {"id": 1, "scale": 0.0}])"));
  }
}

}  // namespace
}  // namespace servesweep::loadgen
