#include "sim/openai_protocol.h"

#include <fmt/format.h>

#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>

namespace servesweep::sim {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

ErrorReply BadRequest(std::string_view message) {
  return MakeError(400, "BadRequestError", message);
}

int64_t CountWords(std::string_view text) {
  int64_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

bool AllIntegers(const Json& array) {
  for (const Json& v : array) {
    if (!v.is_number_integer()) return false;
  }
  return true;
}

// A prompt is a string, a token-id array, or a one-element array holding either.
std::optional<int64_t> PromptTokens(const Json& prompt) {
  if (prompt.is_string()) return CountWords(prompt.get_ref<const std::string&>());
  if (!prompt.is_array()) return std::nullopt;
  if (AllIntegers(prompt)) return static_cast<int64_t>(prompt.size());
  if (prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) {
    return PromptTokens(prompt[0]);
  }
  return std::nullopt;
}

std::optional<int64_t> ChatPromptTokens(const Json& messages) {
  if (!messages.is_array() || messages.empty()) return std::nullopt;
  int64_t tokens = 0;
  for (const Json& message : messages) {
    if (!message.is_object()) return std::nullopt;
    auto content = message.find("content");
    if (content != message.end() && content->is_string()) {
      tokens += CountWords(content->get_ref<const std::string&>());
    }
  }
  return tokens;
}

// A field that is absent or null is unset, as in vLLM's pydantic models.
const Json* Field(const Json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string TokenText(int64_t k) { return fmt::format(" t{}", k); }

}  // namespace

ErrorReply MakeError(unsigned status, std::string_view type, std::string_view message) {
  OrderedJson body = {{"error",
                       {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}};
  return {status, body.dump()};
}

std::variant<CompletionRequest, ErrorReply> ParseCompletionRequest(Api api, std::string_view body,
                                                                   const std::string& model_name,
                                                                   int64_t max_model_len) {
  const Json request = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) return BadRequest("Request body is not valid JSON.");
  if (!request.is_object()) return BadRequest("Request body must be a JSON object.");

  CompletionRequest out;
  out.api = api;
  if (const Json* model = Field(request, "model")) {
    if (!model->is_string()) return BadRequest("`model` must be a string.");
    if (model->get_ref<const std::string&>() != model_name) {
      return MakeError(404, "NotFoundError",
                       fmt::format("The model `{}` does not exist.", model->get<std::string>()));
    }
  }

  const char* prompt_field = api == Api::kChat ? "messages" : "prompt";
  const Json* prompt = Field(request, prompt_field);
  if (prompt == nullptr) return BadRequest(fmt::format("`{}` is required.", prompt_field));
  const std::optional<int64_t> prompt_tok =
      api == Api::kChat ? ChatPromptTokens(*prompt) : PromptTokens(*prompt);
  if (!prompt_tok) {
    return BadRequest(api == Api::kChat
                          ? "`messages` must be a non-empty array of message objects."
                          : "`prompt` must be a string, a token-id array, or one of either in an "
                            "array (batched prompts are not supported).");
  }
  out.prompt_tok = *prompt_tok;

  // Chat prefers max_completion_tokens over the deprecated max_tokens, as vLLM does.
  const Json* max_tok = api == Api::kChat ? Field(request, "max_completion_tokens") : nullptr;
  if (max_tok == nullptr) max_tok = Field(request, "max_tokens");
  if (max_tok != nullptr) {
    if (!max_tok->is_number_integer() || max_tok->get<int64_t>() < 1) {
      return BadRequest("`max_tokens` must be an integer of at least 1.");
    }
    out.max_tok = max_tok->get<int64_t>();
  }
  if (out.prompt_tok + out.max_tok > max_model_len) {
    return BadRequest(fmt::format(
        "This model's maximum context length is {} tokens. However, you requested {} tokens "
        "({} in the messages, {} in the completion). Please reduce the length of the messages "
        "or completion.",
        max_model_len, out.prompt_tok + out.max_tok, out.prompt_tok, out.max_tok));
  }

  if (const Json* stream = Field(request, "stream")) {
    if (!stream->is_boolean()) return BadRequest("`stream` must be a boolean.");
    out.stream = stream->get<bool>();
  }
  if (const Json* options = Field(request, "stream_options")) {
    if (!options->is_object()) return BadRequest("`stream_options` must be an object.");
    if (const Json* usage = Field(*options, "include_usage")) {
      if (!usage->is_boolean()) return BadRequest("`include_usage` must be a boolean.");
      out.include_usage = usage->get<bool>();
    }
  }
  return out;
}

std::string RenderModelList(const std::string& model_name, int64_t created_s,
                            int64_t max_model_len) {
  OrderedJson model = {{"id", model_name},         {"object", "model"},
                       {"created", created_s},     {"owned_by", "servesweep-sim"},
                       {"root", model_name},       {"parent", nullptr},
                       {"max_model_len", max_model_len}};
  OrderedJson list = {{"object", "list"}, {"data", OrderedJson::array({model})}};
  return list.dump();
}

ResponseRenderer::ResponseRenderer(Api api, uint64_t seq, int64_t created_s,
                                   std::string_view model_json)
    : api_(api), seq_(seq), created_s_(created_s), model_json_(model_json) {}

std::string ResponseRenderer::id() const {
  return fmt::format("{}-{}", api_ == Api::kChat ? "chatcmpl" : "cmpl", seq_);
}

void ResponseRenderer::AppendChunkHead(std::string& out) const {
  fmt::format_to(std::back_inserter(out),
                 "data: {{\"id\":\"{}\",\"object\":\"{}\",\"created\":{},\"model\":{},", id(),
                 api_ == Api::kChat ? "chat.completion.chunk" : "text_completion", created_s_,
                 model_json_);
}

void ResponseRenderer::AppendRoleEvent(std::string& out) const {
  AppendChunkHead(out);
  out +=
      "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
      "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n";
}

void ResponseRenderer::AppendTokenEvent(std::string& out, int64_t k, bool last) const {
  AppendChunkHead(out);
  const char* finish = last ? "\"length\"" : "null";
  if (api_ == Api::kChat) {
    fmt::format_to(std::back_inserter(out),
                   "\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" t{}\"}},"
                   "\"logprobs\":null,\"finish_reason\":{},\"stop_reason\":null}}],"
                   "\"usage\":null}}\n\n",
                   k, finish);
  } else {
    fmt::format_to(std::back_inserter(out),
                   "\"choices\":[{{\"index\":0,\"text\":\" t{}\",\"logprobs\":null,"
                   "\"finish_reason\":{},\"stop_reason\":null}}],\"usage\":null}}\n\n",
                   k, finish);
  }
}

void ResponseRenderer::AppendUsageEvent(std::string& out, int64_t prompt_tok,
                                        int64_t completion_tok) const {
  AppendChunkHead(out);
  fmt::format_to(std::back_inserter(out),
                 "\"choices\":[],\"usage\":{{\"prompt_tokens\":{},\"total_tokens\":{},"
                 "\"completion_tokens\":{}}}}}\n\n",
                 prompt_tok, prompt_tok + completion_tok, completion_tok);
}

void ResponseRenderer::AppendDoneEvent(std::string& out) { out += "data: [DONE]\n\n"; }

std::string ResponseRenderer::RenderResponse(int64_t prompt_tok, int64_t completion_tok) const {
  std::string text;
  for (int64_t k = 0; k < completion_tok; ++k) text += TokenText(k);
  OrderedJson choice = {{"index", 0}};
  if (api_ == Api::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}, {"tool_calls", Json::array()}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = "length";
  choice["stop_reason"] = nullptr;
  OrderedJson response = {
      {"id", id()},
      {"object", api_ == Api::kChat ? "chat.completion" : "text_completion"},
      {"created", created_s_},
      {"model", Json::parse(model_json_)},
      {"choices", OrderedJson::array({choice})},
      {"usage",
       {{"prompt_tokens", prompt_tok},
        {"total_tokens", prompt_tok + completion_tok},
        {"completion_tokens", completion_tok}}}};
  return response.dump();
}

}  // namespace servesweep::sim
