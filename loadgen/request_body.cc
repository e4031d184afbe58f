#include "loadgen/request_body.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "loadgen/prompt_builder.h"

namespace servesweep::loadgen {

RequestBodyWriter::RequestBodyWriter(const LoadSettings& s)
    : s_(s), chat_(s.api == Api::kChatCompletions) {
  // nlohmann's own spelling of the two values that are not integers or fixed words.
  const std::string model = nlohmann::json(s.model).dump();
  const std::string temperature = nlohmann::json(s.temperature).dump();
  const std::string ignore_eos = s.ignore_eos ? "\"ignore_eos\":true," : "";
  const std::string stream = R"("stream":true,"stream_options":{"include_usage":true},)";
  if (chat_) {
    head_ = "{" + ignore_eos + "\"max_completion_tokens\":";
    middle_ = R"(,"messages":[{"content":")";
    tail_ = R"(","role":"user"}],"model":)" + model + "," + stream +
            "\"temperature\":" + temperature + "}";
  } else {
    head_ = "{" + ignore_eos + "\"max_tokens\":";
    middle_ = ",\"model\":" + model + ",\"prompt\":\"";
    tail_ = "\"," + stream + "\"temperature\":" + temperature + "}";
  }
}

void RequestBodyWriter::Write(const RequestContent& c, std::string* body) const {
  if (c.has_messages || c.has_prompt_text || (!chat_ && s_.token_id_prompts)) {
    *body = WriteThroughJson(c);
    return;
  }
  body->clear();
  body->append(head_);
  fmt::format_to(std::back_inserter(*body), "{}", c.output_len_tok);
  if (chat_) fmt::format_to(std::back_inserter(*body), ",\"max_tokens\":{}", c.output_len_tok);
  body->append(middle_);
  AppendPrompt(s_.seed, c.prompt_index, c.input_len_tok, c.prefix, body);
  body->append(tail_);
}

std::string RequestBodyWriter::WriteThroughJson(const RequestContent& c) const {
  nlohmann::json body;
  body["model"] = s_.model;
  if (chat_) {
    if (c.has_messages) {
      body["messages"] = c.messages;
    } else {
      const std::string prompt = BuildPrompt(s_.seed, c.prompt_index, c.input_len_tok, c.prefix);
      body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
    }
    // Newer servers read max_completion_tokens, older ones max_tokens: send both.
    body["max_completion_tokens"] = c.output_len_tok;
  } else if (c.has_prompt_text) {
    body["prompt"] = c.prompt_text;
  } else if (s_.token_id_prompts) {
    body["prompt"] = BuildPromptTokenIds(s_.seed, c.prompt_index, c.input_len_tok, c.prefix);
  } else {
    body["prompt"] = BuildPrompt(s_.seed, c.prompt_index, c.input_len_tok, c.prefix);
  }
  body["max_tokens"] = c.output_len_tok;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  // Sent only when set, as vLLM does: OpenAI's own API rejects unknown fields.
  if (s_.ignore_eos) body["ignore_eos"] = true;
  body["temperature"] = s_.temperature;
  return body.dump();
}

}  // namespace servesweep::loadgen
