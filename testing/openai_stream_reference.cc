// The reference decoder: see openai_stream_reference.h.
#include "testing/openai_stream_reference.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace servesweep::testing {

using loadgen::StreamChunk;
namespace {

using nlohmann::json;

constexpr size_t kMaxErrorChars = 200;

std::string Truncate(std::string_view s) {
  return std::string(s.substr(0, std::min(s.size(), kMaxErrorChars)));
}

bool NonEmptyString(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

bool NonEmptyArray(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_array() && !it->empty();
}

uint32_t UintField(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return 0;
  double v = it->get<double>();
  if (!(v > 0)) return 0;
  return v >= 4294967296.0 ? UINT32_MAX : static_cast<uint32_t>(v);
}

// Tokens in an output chunk when the server says: per-token logprobs list one entry per token
// (completions: logprobs.tokens; chat: logprobs.content). 0 = the server did not say.
uint32_t LogprobTokens(const json& choice) {
  auto lp = choice.find("logprobs");
  if (lp == choice.end() || !lp->is_object()) return 0;
  for (const char* key : {"tokens", "content"}) {
    auto it = lp->find(key);
    if (it != lp->end() && it->is_array() && !it->empty()) {
      return static_cast<uint32_t>(it->size());
    }
  }
  return 0;
}

}  // namespace

StreamChunk ReferenceStreamDecoder::Decode(std::string_view payload) {
  StreamChunk chunk;
  // Servers pad with spaces or newlines now and then; [DONE] must still be recognised.
  size_t b = payload.find_first_not_of(" \t\r\n");
  size_t e = payload.find_last_not_of(" \t\r\n");
  payload = b == std::string_view::npos ? std::string_view{} : payload.substr(b, e - b + 1);
  if (payload == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  if (payload.empty()) return chunk;  // an empty data line carries nothing

  json doc = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    chunk.error = true;
    chunk.error_text = "bad stream payload: " + Truncate(payload);
    return chunk;
  }

  // OpenAI's shape {"error": {...}}; older vLLM sent {"object": "error", "message": ...}.
  auto err = doc.find("error");
  bool object_error = NonEmptyString(doc, "object") && doc["object"] == "error";
  if ((err != doc.end() && !err->is_null()) || object_error) {
    chunk.error = true;
    std::string message;
    if (object_error && NonEmptyString(doc, "message")) {
      message = doc["message"].get<std::string>();
    } else if (err != doc.end() && err->is_object() && NonEmptyString(*err, "message")) {
      message = (*err)["message"].get<std::string>();
    } else if (err != doc.end() && err->is_string()) {
      message = err->get<std::string>();
    } else {
      message = payload;
    }
    chunk.error_text = "server error: " + Truncate(message);
    return chunk;
  }

  auto usage = doc.find("usage");
  if (usage != doc.end() && usage->is_object()) {
    chunk.has_usage = true;
    chunk.prompt_tokens = UintField(*usage, "prompt_tokens");
    chunk.completion_tokens = UintField(*usage, "completion_tokens");
  }

  auto choices = doc.find("choices");
  if (choices != doc.end() && choices->is_array() && !choices->empty() &&
      (*choices)[0].is_object()) {
    const json& choice = (*choices)[0];
    bool text = NonEmptyString(choice, "text");
    auto delta = choice.find("delta");
    if (!text && delta != choice.end() && delta->is_object()) {
      // `reasoning` is the field name newer vLLM uses for reasoning_content.
      text = NonEmptyString(*delta, "content") || NonEmptyString(*delta, "reasoning_content") ||
             NonEmptyString(*delta, "reasoning") || NonEmptyArray(*delta, "tool_calls");
    }
    chunk.output = text;
  }

  if (chunk.output) {
    uint32_t tokens = LogprobTokens((*choices)[0]);
    if (!chunk.has_usage) usage_on_every_output_chunk_ = false;
    if (tokens == 0 && chunk.has_usage && usage_on_every_output_chunk_ &&
        chunk.completion_tokens > last_completion_tokens_) {
      tokens = chunk.completion_tokens - last_completion_tokens_;
    }
    chunk.tokens = std::max<uint32_t>(tokens, 1);
  }
  if (chunk.has_usage) {
    last_completion_tokens_ = std::max(last_completion_tokens_, chunk.completion_tokens);
  }
  return chunk;
}

bool SameChunk(const StreamChunk& a, const StreamChunk& b) {
  return a.done == b.done && a.error == b.error && a.error_text == b.error_text &&
         a.output == b.output && a.tokens == b.tokens && a.has_usage == b.has_usage &&
         a.prompt_tokens == b.prompt_tokens && a.completion_tokens == b.completion_tokens;
}

}  // namespace servesweep::testing
