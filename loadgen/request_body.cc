#include "loadgen/request_body.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "loadgen/prompt_builder.h"

namespace servesweep::loadgen {

RequestBodyWriter::RequestBodyWriter(const LoadSettings& s)
    : s_(s), chat_(s.api == Api::kChatCompletions) {
  // nlohmann's own spelling of the values that are not integers or fixed words.
  const std::string temperature = nlohmann::json(s.temperature).dump();
  const std::string ignore_eos = s.ignore_eos ? "\"ignore_eos\":true," : "";
  const std::string stream = R"("stream":true,"stream_options":{"include_usage":true},)";
  for (int32_t adapter = -1; adapter < static_cast<int32_t>(s.adapters.size()); ++adapter) {
    const std::string model = nlohmann::json(ModelOf(adapter)).dump();
    Parts p;
    p.lora = LoraListOf(adapter);
    const std::string lora = p.lora.is_null() ? "" : "\"lora\":" + p.lora.dump() + ",";
    if (chat_) {
      p.head = "{" + ignore_eos + lora + "\"max_completion_tokens\":";
      p.middle = R"(,"messages":[{"content":")";
      p.tail = R"(","role":"user"}],"model":)" + model + "," + stream +
               "\"temperature\":" + temperature + "}";
    } else {
      p.head = "{" + ignore_eos + lora + "\"max_tokens\":";
      p.middle = ",\"model\":" + model + ",\"prompt\":\"";
      p.tail = "\"," + stream + "\"temperature\":" + temperature + "}";
    }
    parts_.push_back(std::move(p));
  }
}

const std::string& RequestBodyWriter::ModelOf(int32_t adapter) const {
  return adapter < 0 ? s_.model : s_.adapters[static_cast<size_t>(adapter)].model;
}

nlohmann::json RequestBodyWriter::LoraListOf(int32_t adapter) const {
  // llama.cpp applies every loaded adapter at its global scale unless a request lists them: a
  // base request lists each at scale 0, an adapter's request only its own (the rest are 0).
  nlohmann::json list = nlohmann::json::array();
  for (size_t k = 0; k < s_.adapters.size(); ++k) {
    const auto& a = s_.adapters[k];
    if (a.lora_id < 0) continue;
    if (adapter < 0) {
      list.push_back({{"id", a.lora_id}, {"scale", 0.0}});
    } else if (static_cast<size_t>(adapter) == k) {
      list.push_back({{"id", a.lora_id}, {"scale", 1.0}});
    }
  }
  return list.empty() ? nlohmann::json() : list;
}

void RequestBodyWriter::Write(const RequestContent& c, std::string* body) const {
  if (c.has_messages || c.has_prompt_text || (!chat_ && s_.token_id_prompts)) {
    *body = WriteThroughJson(c);
    return;
  }
  const Parts& p = PartsOf(c.adapter);
  body->clear();
  body->append(p.head);
  fmt::format_to(std::back_inserter(*body), "{}", c.output_len_tok);
  if (chat_) fmt::format_to(std::back_inserter(*body), ",\"max_tokens\":{}", c.output_len_tok);
  body->append(p.middle);
  AppendPrompt(s_.seed, c.prompt_index, c.input_len_tok, c.prefix, body);
  body->append(p.tail);
}

std::string RequestBodyWriter::WriteThroughJson(const RequestContent& c) const {
  nlohmann::json body;
  body["model"] = ModelOf(c.adapter);
  if (const auto& lora = PartsOf(c.adapter).lora; !lora.is_null()) body["lora"] = lora;
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
