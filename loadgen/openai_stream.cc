// The decoder reads each payload once with JsonCursor (no DOM, no allocation on the common
// path) and keeps only the fields the definitions in openai_stream.h name. It must agree with a
// full parse (nlohmann::json) on every input: tests/openai_stream_reference.{h,cc} keeps that
// logic as the oracle for the differential test and the stream fuzz target. JSON objects keep
// the LAST of duplicate keys (as nlohmann does), so each captured field is reset whenever its
// key is seen again.
#include "loadgen/openai_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "loadgen/json_cursor.h"

namespace servesweep::loadgen {
namespace {

constexpr size_t kMaxErrorChars = 200;

std::string Truncate(std::string_view s) {
  return std::string(s.substr(0, std::min(s.size(), kMaxErrorChars)));
}

// A key compared by its decoded value: raw bytes when it has no escape (the common case; a
// compile-time length lets the compiler inline the comparison).
template <size_t N>
[[gnu::always_inline]] inline bool KeyIs(const JsonString& key, const char (&name)[N]) {
  if (!key.escaped) return key.raw.size() == N - 1 && std::memcmp(key.raw.data(), name, N - 1) == 0;
  return StringEquals(key, std::string_view(name, N - 1));
}

// What one payload says, as far as the definitions care: the output facts and the errors.
struct Facts : OpenAiStreamDecoder::OutputFacts {
  bool error_present = false;         // an "error" member, of any type
  char error_kind = 0;                // first byte of its value: '{', '"', 'n' (null), other
  bool error_message_string = false;  // error object's "message" is a string
  JsonString error_message;
  JsonString error_string;     // "error" as a string
  bool object_string = false;  // "object" is a string
  JsonString object;
  bool message_string = false;  // top-level "message" is a string (older vLLM errors)
  JsonString message;
  // The bytes of each output string's value as last read (data() null: none, or not a string).
  std::string_view text_value, content_value, reasoning_content_value, reasoning_value;
};

// The usage numbers, as nlohmann's get<double>() then our cast: non-numbers count 0, negatives
// 0, fractions truncate, anything at or above 2^32 saturates.
uint32_t ToTokens(double v) {
  if (!(v > 0)) return 0;
  if (v >= 4294967296.0) return UINT32_MAX;
  return static_cast<uint32_t>(v);
}

class PayloadReader {
 public:
  PayloadReader(std::string_view payload, std::vector<char>* stack, Facts* facts)
      : cur_(payload, stack), f_(*facts) {}

  bool Read() {
    if (!cur_.SkipBom()) return false;
    if (cur_.Peek() != '{') {
      not_object_ = true;
      return cur_.Skip() && cur_.AtEnd();
    }
    if (!Object([this](const JsonString& key) { return RootMember(key); })) return false;
    return cur_.AtEnd();
  }

  // The payload was valid JSON but not an object.
  bool not_object() const { return not_object_; }

 private:
  template <typename OnMember>
  bool Object(OnMember&& on_member) {
    if (!cur_.Consume('{')) return false;
    JsonString key;
    bool done = false;
    for (bool first = true;; first = false) {
      if (!cur_.NextMember(first, &key, &done)) return done;
      if (!on_member(key)) return false;
    }
  }

  // A string member value: sets *is_string and *value, or validates and skips a non-string.
  bool StringOrSkip(bool* is_string, JsonString* value) {
    *is_string = cur_.Peek() == '"';
    return *is_string ? cur_.ReadString(value) : cur_.Skip();
  }

  // *value: the string's bytes, or a null view when it is not a string.
  bool NonEmptyStringOrSkip(bool* non_empty, std::string_view* value) {
    bool is_string = false;
    JsonString s;
    if (!StringOrSkip(&is_string, &s)) return false;
    *non_empty = is_string && !s.raw.empty();  // an escape decodes to >= 1 byte
    *value = is_string ? s.raw : std::string_view();
    return true;
  }

  // The size of an array member, 0 when it is not an array.
  bool ArraySizeOrSkip(size_t* size) {
    *size = 0;
    return cur_.Peek() == '[' ? cur_.CountElements(size) : cur_.Skip();
  }

  bool NumberOrSkip(double* value) {
    *value = 0;
    const char c = cur_.Peek();
    return c == '-' || (c >= '0' && c <= '9') ? cur_.ReadNumber(value) : cur_.Skip();
  }

  // An object value's number member `name` into *value (left as it was when absent, or when
  // the value is not an object or the member not a number).
  template <size_t N>
  bool MemberNumber(const char (&name)[N], double* value) {
    if (cur_.Peek() != '{') return cur_.Skip();
    return Object([this, &name, value](const JsonString& k) {
      const char c = cur_.Peek();
      if (KeyIs(k, name) && (c == '-' || (c >= '0' && c <= '9'))) return cur_.ReadNumber(value);
      return cur_.Skip();
    });
  }

  bool RootMember(const JsonString& key) {
    if (KeyIs(key, "choices")) return Choices();
    if (KeyIs(key, "usage")) {
      f_.usage_object = false;
      f_.prompt_tokens = f_.completion_tokens = 0;
      f_.usage_cached_tokens = -1;
      if (cur_.Peek() != '{') return cur_.Skip();
      f_.usage_object = true;
      return Object([this](const JsonString& k) {
        if (KeyIs(k, "prompt_tokens")) return NumberOrSkip(&f_.prompt_tokens);
        if (KeyIs(k, "completion_tokens")) return NumberOrSkip(&f_.completion_tokens);
        if (KeyIs(k, "prompt_tokens_details")) {
          return MemberNumber("cached_tokens", &f_.usage_cached_tokens);
        }
        return cur_.Skip();
      });
    }
    if (KeyIs(key, "timings")) return MemberNumber("cache_n", &f_.timings_cached_tokens);
    if (KeyIs(key, "object")) return StringOrSkip(&f_.object_string, &f_.object);
    if (KeyIs(key, "error")) return Error();
    if (KeyIs(key, "message")) return StringOrSkip(&f_.message_string, &f_.message);
    return cur_.Skip();
  }

  bool Error() {
    f_.error_present = true;
    f_.error_message_string = false;
    f_.error_kind = cur_.Peek();
    if (f_.error_kind == '"') return cur_.ReadString(&f_.error_string);
    if (f_.error_kind != '{') return cur_.Skip();
    return Object([this](const JsonString& k) {
      if (KeyIs(k, "message")) return StringOrSkip(&f_.error_message_string, &f_.error_message);
      return cur_.Skip();
    });
  }

  bool Choices() {
    f_.choice_object = false;
    ResetChoice();
    if (cur_.Peek() != '[') return cur_.Skip();
    cur_.Consume('[');
    bool done = false;
    for (bool first = true;; first = false) {
      if (!cur_.NextElement(first, &done)) return done;
      if (first && cur_.Peek() == '{') {
        f_.choice_object = true;
        if (!Object([this](const JsonString& k) { return ChoiceMember(k); })) return false;
      } else if (!cur_.Skip()) {
        return false;
      }
    }
  }

  void ResetChoice() {
    f_.text = false;
    f_.text_value = {};
    ResetDelta();
    f_.logprobs_object = false;
    f_.logprob_tokens = f_.logprob_content = 0;
  }

  void ResetDelta() {
    f_.delta_object = false;
    f_.content = f_.reasoning_content = f_.reasoning = f_.tool_calls = false;
    f_.content_value = f_.reasoning_content_value = f_.reasoning_value = {};
  }

  bool ChoiceMember(const JsonString& key) {
    if (KeyIs(key, "text")) return NonEmptyStringOrSkip(&f_.text, &f_.text_value);
    if (KeyIs(key, "delta")) {
      ResetDelta();
      if (cur_.Peek() != '{') return cur_.Skip();
      f_.delta_object = true;
      return Object([this](const JsonString& k) {
        if (KeyIs(k, "content")) return NonEmptyStringOrSkip(&f_.content, &f_.content_value);
        // `reasoning` is the field name newer vLLM uses for reasoning_content.
        if (KeyIs(k, "reasoning_content")) {
          return NonEmptyStringOrSkip(&f_.reasoning_content, &f_.reasoning_content_value);
        }
        if (KeyIs(k, "reasoning")) return NonEmptyStringOrSkip(&f_.reasoning, &f_.reasoning_value);
        if (KeyIs(k, "tool_calls")) {
          size_t n = 0;
          if (!ArraySizeOrSkip(&n)) return false;
          f_.tool_calls = n > 0;
          return true;
        }
        return cur_.Skip();
      });
    }
    if (KeyIs(key, "logprobs")) {
      f_.logprobs_object = false;
      f_.logprob_tokens = f_.logprob_content = 0;
      if (cur_.Peek() != '{') return cur_.Skip();
      f_.logprobs_object = true;
      return Object([this](const JsonString& k) {
        if (KeyIs(k, "tokens")) return ArraySizeOrSkip(&f_.logprob_tokens);
        if (KeyIs(k, "content")) return ArraySizeOrSkip(&f_.logprob_content);
        return cur_.Skip();
      });
    }
    return cur_.Skip();
  }

  JsonCursor cur_;
  Facts& f_;
  bool not_object_ = false;
};

}  // namespace

void OpenAiStreamDecoder::Reset() {
  usage_on_every_output_chunk_ = true;
  last_completion_tokens_ = 0;
}

bool OpenAiStreamDecoder::MatchesShape(std::string_view payload, OutputFacts* facts) const {
  const Shape& sh = shape_;
  if (sh.decides == nullptr) return false;
  const std::string_view doc = sh.doc;
  const size_t suffix = doc.size() - sh.value_end;
  if (payload.size() < sh.value_begin + suffix) return false;
  if (std::memcmp(payload.data(), doc.data(), sh.value_begin) != 0) return false;
  if (std::memcmp(payload.data() + payload.size() - suffix, doc.data() + sh.value_end, suffix) !=
      0) {
    return false;
  }
  const std::string_view value =
      payload.substr(sh.value_begin, payload.size() - suffix - sh.value_begin);
  if (!IsPlainStringBody(value)) return false;
  *facts = sh.facts;
  facts->*sh.decides = !value.empty();
  return true;
}

StreamChunk OpenAiStreamDecoder::Decode(std::string_view payload) {
  // Servers pad with spaces or newlines now and then; [DONE] must still be recognised.
  size_t b = payload.find_first_not_of(" \t\r\n");
  size_t e = payload.find_last_not_of(" \t\r\n");
  payload = b == std::string_view::npos ? std::string_view{} : payload.substr(b, e - b + 1);
  if (payload == "[DONE]") {
    StreamChunk chunk;
    chunk.done = true;
    return chunk;
  }
  if (payload.empty()) return StreamChunk{};  // an empty data line carries nothing

  OutputFacts same;
  if (MatchesShape(payload, &same)) {
    ++shape_hits_;
    return FromFacts(same);
  }

  Facts f;
  PayloadReader reader(payload, &stack_, &f);
  if (!reader.Read() || reader.not_object()) {
    StreamChunk chunk;
    chunk.error = true;
    chunk.error_text = "bad stream payload: " + Truncate(payload);
    return chunk;
  }

  // OpenAI's shape {"error": {...}}; older vLLM sent {"object": "error", "message": ...}.
  const bool object_error =
      f.object_string && !f.object.raw.empty() && StringEquals(f.object, "error");
  if ((f.error_present && f.error_kind != 'n') || object_error) {
    StreamChunk chunk;
    chunk.error = true;
    std::string message;
    if (object_error && f.message_string && !f.message.raw.empty()) {
      message = Unescape(f.message);
    } else if (f.error_present && f.error_kind == '{' && f.error_message_string &&
               !f.error_message.raw.empty()) {
      message = Unescape(f.error_message);
    } else if (f.error_present && f.error_kind == '"') {
      message = Unescape(f.error_string);
    } else {
      message = payload;
    }
    chunk.error_text = "server error: " + Truncate(message);
    return chunk;
  }

  // The newest shape with an output string replaces the one kept (the first such string read:
  // text, content, reasoning_content, reasoning).
  const std::pair<std::string_view, bool OutputFacts::*> values[] = {
      {f.text_value, &OutputFacts::text},
      {f.content_value, &OutputFacts::content},
      {f.reasoning_content_value, &OutputFacts::reasoning_content},
      {f.reasoning_value, &OutputFacts::reasoning}};
  for (const auto& [value, decides] : values) {
    if (value.data() == nullptr) continue;
    shape_.doc.assign(payload);
    shape_.value_begin = static_cast<size_t>(value.data() - payload.data());
    shape_.value_end = shape_.value_begin + value.size();
    shape_.decides = decides;
    shape_.facts = f;
    break;
  }
  return FromFacts(f);
}

StreamChunk OpenAiStreamDecoder::FromFacts(const OutputFacts& f) {
  StreamChunk chunk;
  if (f.usage_object) {
    chunk.has_usage = true;
    chunk.prompt_tokens = ToTokens(f.prompt_tokens);
    chunk.completion_tokens = ToTokens(f.completion_tokens);
  }
  const double cached =
      f.usage_cached_tokens >= 0 ? f.usage_cached_tokens : f.timings_cached_tokens;
  if (cached >= 0) chunk.cached_prompt_tokens = ToTokens(cached);

  if (f.choice_object) {
    chunk.output = f.text || (f.delta_object &&
                              (f.content || f.reasoning_content || f.reasoning || f.tool_calls));
  }

  if (chunk.output) {
    // Tokens in an output chunk when the server says: per-token logprobs list one entry per
    // token (completions: logprobs.tokens; chat: logprobs.content).
    uint32_t tokens = 0;
    if (f.logprobs_object) {
      tokens = static_cast<uint32_t>(f.logprob_tokens > 0 ? f.logprob_tokens : f.logprob_content);
    }
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

}  // namespace servesweep::loadgen
