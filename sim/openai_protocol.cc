#include "sim/openai_protocol.h"

#include <fmt/format.h>

#include <charconv>
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
std::optional<int64_t> PromptTokens(const Json& prompt,
                                    std::optional<ArithmeticQuestion>* question) {
  if (prompt.is_string()) {
    *question = FindArithmeticQuestion(prompt.get_ref<const std::string&>());
    return CountWords(prompt.get_ref<const std::string&>());
  }
  if (!prompt.is_array()) return std::nullopt;
  if (AllIntegers(prompt)) return static_cast<int64_t>(prompt.size());
  if (prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) {
    return PromptTokens(prompt[0], question);
  }
  return std::nullopt;
}

// Chains the prompt's tokens into block hashes (FNV-1a over each token's bytes, seeded with
// the previous block's hash).
class BlockHasher {
 public:
  explicit BlockHasher(int64_t block_tok) : block_tok_(block_tok) {}
  void Add(std::string_view token) {
    for (unsigned char c : token) hash_ = (hash_ ^ c) * 0x100000001b3ULL;
    hash_ = (hash_ ^ 0xff) * 0x100000001b3ULL;  // token separator
    if (++in_block_ == block_tok_) {
      hashes_.push_back(hash_);
      in_block_ = 0;
    }
  }
  void AddWords(std::string_view text) {
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && IsSpace(text[i])) ++i;
      const size_t start = i;
      while (i < text.size() && !IsSpace(text[i])) ++i;
      if (i > start) Add(text.substr(start, i - start));
    }
  }
  std::vector<uint64_t> Take() { return std::move(hashes_); }

 private:
  static bool IsSpace(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  }
  int64_t block_tok_;
  int64_t in_block_ = 0;
  uint64_t hash_ = 0xcbf29ce484222325ULL;
  std::vector<uint64_t> hashes_;
};

void HashPrompt(const Json& prompt, BlockHasher& hasher) {
  if (prompt.is_string()) return hasher.AddWords(prompt.get_ref<const std::string&>());
  if (!prompt.is_array()) return;
  if (AllIntegers(prompt)) {
    for (const Json& id : prompt) hasher.Add(std::to_string(id.get<int64_t>()));
    return;
  }
  if (prompt.size() == 1) HashPrompt(prompt[0], hasher);
}

std::optional<int64_t> ChatPromptTokens(const Json& messages,
                                        std::optional<ArithmeticQuestion>* question) {
  if (!messages.is_array() || messages.empty()) return std::nullopt;
  int64_t tokens = 0;
  for (const Json& message : messages) {
    if (!message.is_object()) return std::nullopt;
    auto content = message.find("content");
    if (content != message.end() && content->is_string()) {
      tokens += CountWords(content->get_ref<const std::string&>());
      if (auto q = FindArithmeticQuestion(content->get_ref<const std::string&>())) *question = q;
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

void AppendInt(std::string& out, int64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, result.ptr);
}

// ---- The fast path: a validating, allocation-free scan of the request object. ----

// Reads one JSON document; every method returns false when the input is malformed OR outside
// what the fast path decides (then the DOM path runs and produces the answer or the error).
class Scanner {
 public:
  explicit Scanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  void Ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool AtEnd() const { return p_ == end_; }
  bool Peek(char c) {
    Ws();
    return p_ < end_ && *p_ == c;
  }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++p_;
    return true;
  }
  bool PeekNull() { return Peek('n'); }
  bool Literal(std::string_view word) {
    Ws();
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return false;
    }
    p_ += word.size();
    return true;
  }
  bool Bool(bool* value) {
    if (Literal("true")) {
      *value = true;
      return true;
    }
    if (Literal("false")) {
      *value = false;
      return true;
    }
    return false;
  }
  // A string of printable ASCII; simple escapes allowed (escaped is set), \u is not.
  bool String(std::string_view* raw, bool* escaped) {
    if (!Eat('"')) return false;
    const char* begin = p_;
    *escaped = false;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        *raw = std::string_view(begin, static_cast<size_t>(p_ - begin));
        ++p_;
        return true;
      }
      if (c < 0x20 || c >= 0x80) return false;
      if (c == '\\') {
        if (++p_ == end_) return false;
        if (std::string_view("\"\\/bfnrt").find(*p_) == std::string_view::npos) return false;
        *escaped = true;
      }
      ++p_;
    }
    return false;
  }
  // A JSON number; *integer is set when it has no fraction or exponent and fits 18 digits.
  bool Number(bool* integer, int64_t* value) {
    Ws();
    const char* begin = p_;
    const bool negative = p_ < end_ && *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_ || !IsDigit(*p_)) return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    const size_t digits = static_cast<size_t>(p_ - begin) - (negative ? 1 : 0);
    bool plain = true;
    if (p_ < end_ && *p_ == '.') {
      plain = false;
      if (++p_ == end_ || !IsDigit(*p_)) return false;
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      plain = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !IsDigit(*p_)) return false;
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    *integer = plain && digits <= 18;
    if (*integer) {
      int64_t v = 0;
      for (const char* d = begin + (negative ? 1 : 0); d < begin + (negative ? 1 : 0) + digits;
           ++d) {
        v = v * 10 + (*d - '0');
      }
      *value = negative ? -v : v;
    }
    return true;
  }
  bool SkipValue(int depth = 0) {
    if (depth > 32) return false;
    Ws();
    if (p_ == end_) return false;
    std::string_view raw;
    bool flag = false;
    int64_t number = 0;
    switch (*p_) {
      case '"':
        return String(&raw, &flag);
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      case '{':
        ++p_;
        if (Eat('}')) return true;
        do {
          if (!String(&raw, &flag) || !Eat(':') || !SkipValue(depth + 1)) return false;
        } while (Eat(','));
        return Eat('}');
      case '[':
        ++p_;
        if (Eat(']')) return true;
        do {
          if (!SkipValue(depth + 1)) return false;
        } while (Eat(','));
        return Eat(']');
      default:
        return Number(&flag, &number);
    }
  }

 private:
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  const char* p_;
  const char* end_;
};

// Words of a raw JSON string (escapes not decoded): \n \t \r \f are whitespace, other escapes
// are one non-space character, exactly as CountWords sees the decoded text.
int64_t CountRawWords(std::string_view raw, bool escaped) {
  if (!escaped) return CountWords(raw);
  int64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '\\') {
      const char e = raw[++i];
      c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'f' ? '\f' : 'x';
    }
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

// An array of integers (the opening '[' already read); counts them.
bool ScanIntArray(Scanner& s, int64_t* count) {
  *count = 0;
  if (s.Eat(']')) return true;
  do {
    bool integer = false;
    int64_t value = 0;
    if (!s.Number(&integer, &value) || !integer) return false;
    ++*count;
  } while (s.Eat(','));
  return s.Eat(']');
}

// A completions prompt: a string, a token-id array, [string] or [[ids]].
// (The question's own characters never need escapes, so the raw text is searched.)
bool ScanPrompt(Scanner& s, int64_t* tokens, std::optional<ArithmeticQuestion>* question) {
  std::string_view raw;
  bool escaped = false;
  if (s.Peek('"')) {
    if (!s.String(&raw, &escaped)) return false;
    *tokens = CountRawWords(raw, escaped);
    *question = FindArithmeticQuestion(raw);
    return true;
  }
  if (!s.Eat('[')) return false;
  if (s.Peek('"')) {
    if (!s.String(&raw, &escaped) || !s.Eat(']')) return false;
    *tokens = CountRawWords(raw, escaped);
    *question = FindArithmeticQuestion(raw);
    return true;
  }
  if (s.Eat('[')) return ScanIntArray(s, tokens) && s.Eat(']');
  return ScanIntArray(s, tokens);
}

// Chat messages: a non-empty array of objects; the words of each string `content` count.
bool ScanMessages(Scanner& s, int64_t* tokens, std::optional<ArithmeticQuestion>* question) {
  *tokens = 0;
  if (!s.Eat('[') || s.Peek(']')) return false;
  do {
    if (!s.Eat('{')) return false;
    bool seen_content = false;
    if (!s.Eat('}')) {
      do {
        std::string_view key, raw;
        bool escaped = false;
        if (!s.String(&key, &escaped) || escaped || !s.Eat(':')) return false;
        if (key == "content") {
          if (seen_content) return false;
          seen_content = true;
          if (s.Peek('"')) {
            if (!s.String(&raw, &escaped)) return false;
            *tokens += CountRawWords(raw, escaped);
            if (auto q = FindArithmeticQuestion(raw)) *question = q;
            continue;
          }
        }
        if (!s.SkipValue(2)) return false;
      } while (s.Eat(','));
      if (!s.Eat('}')) return false;
    }
  } while (s.Eat(','));
  return s.Eat(']');
}

// null (unset) or an integer >= 1.
bool ScanMaxTokens(Scanner& s, std::optional<int64_t>* out) {
  if (s.PeekNull()) return s.Literal("null");
  bool integer = false;
  int64_t value = 0;
  if (!s.Number(&integer, &value) || !integer || value < 1) return false;
  *out = value;
  return true;
}

// null or a boolean.
bool ScanOptionalBool(Scanner& s, bool* out) {
  if (s.PeekNull()) return s.Literal("null");
  return s.Bool(out);
}

constexpr int32_t kNotServed = -2;

// The adapter `name` selects: -1 for the base model, kNotServed for a name served by neither.
int32_t ServedAs(std::string_view name, std::string_view model_name,
                 const std::vector<std::string>& adapters) {
  if (name == model_name) return -1;
  for (size_t k = 0; k < adapters.size(); ++k) {
    if (name == adapters[k]) return static_cast<int32_t>(k);
  }
  return kNotServed;
}

}  // namespace

std::optional<CompletionRequest> FastParseCompletionRequest(
    Api api, std::string_view body, std::string_view model_name, int64_t max_model_len,
    const std::vector<std::string>& adapters) {
  Scanner s(body);
  if (!s.Eat('{')) return std::nullopt;
  CompletionRequest out;
  out.api = api;
  std::optional<int64_t> prompt_tok, max_tokens, max_completion_tokens;
  bool seen_model = false, seen_stream = false, seen_options = false;
  const std::string_view prompt_key = api == Api::kChat ? "messages" : "prompt";
  if (!s.Eat('}')) {
    do {
      std::string_view key;
      bool escaped = false;
      if (!s.String(&key, &escaped) || escaped || !s.Eat(':')) return std::nullopt;
      bool ok = true;
      if (key == "model") {
        if (seen_model) return std::nullopt;
        seen_model = true;
        if (s.PeekNull()) {
          ok = s.Literal("null");
        } else {
          std::string_view name;
          ok = s.String(&name, &escaped) && !escaped;
          if (ok) out.adapter = ServedAs(name, model_name, adapters);
          ok = ok && out.adapter != kNotServed;
        }
      } else if (key == prompt_key) {
        if (prompt_tok) return std::nullopt;
        int64_t tokens = 0;
        ok = api == Api::kChat ? ScanMessages(s, &tokens, &out.question)
                               : ScanPrompt(s, &tokens, &out.question);
        prompt_tok = tokens;
      } else if (key == "max_tokens") {
        if (max_tokens) return std::nullopt;
        ok = ScanMaxTokens(s, &max_tokens);
        if (!max_tokens) max_tokens = 0;  // seen, unset (0 is never a valid value)
      } else if (key == "max_completion_tokens") {
        if (max_completion_tokens) return std::nullopt;
        ok = ScanMaxTokens(s, &max_completion_tokens);
        if (!max_completion_tokens) max_completion_tokens = 0;
      } else if (key == "stream") {
        if (seen_stream) return std::nullopt;
        seen_stream = true;
        ok = ScanOptionalBool(s, &out.stream);
      } else if (key == "stream_options") {
        if (seen_options) return std::nullopt;
        seen_options = true;
        if (s.PeekNull()) {
          ok = s.Literal("null");
        } else if (!s.Eat('{')) {
          ok = false;
        } else if (!s.Eat('}')) {
          bool seen_usage = false;
          do {
            std::string_view option;
            if (!s.String(&option, &escaped) || escaped || !s.Eat(':')) return std::nullopt;
            if (option == "include_usage") {
              if (seen_usage) return std::nullopt;
              seen_usage = true;
              ok = ScanOptionalBool(s, &out.include_usage);
            } else {
              ok = s.SkipValue(1);
            }
            if (!ok) return std::nullopt;
          } while (s.Eat(','));
          ok = s.Eat('}');
        }
      } else {
        ok = s.SkipValue(1);
      }
      if (!ok) return std::nullopt;
    } while (s.Eat(','));
    if (!s.Eat('}')) return std::nullopt;
  }
  s.Ws();
  if (!s.AtEnd() || !prompt_tok) return std::nullopt;
  out.prompt_tok = *prompt_tok;
  // Chat prefers max_completion_tokens over max_tokens, as vLLM does (0 = present but null).
  if (api == Api::kChat && max_completion_tokens.value_or(0) > 0) {
    out.max_tok = *max_completion_tokens;
  } else if (max_tokens.value_or(0) > 0) {
    out.max_tok = *max_tokens;
  }
  if (out.prompt_tok + out.max_tok > max_model_len) return std::nullopt;
  return out;
}

std::optional<ArithmeticQuestion> FindArithmeticQuestion(std::string_view text) {
  constexpr std::string_view kLead = "What is ";
  auto number = [](std::string_view t, size_t* i, int64_t* out) {
    const size_t begin = *i;
    int64_t v = 0;
    while (*i < t.size() && t[*i] >= '0' && t[*i] <= '9' && *i - begin < 9) {
      v = v * 10 + (t[*i] - '0');
      ++*i;
    }
    *out = v;
    return *i > begin;
  };
  for (size_t at = text.find(kLead); at != std::string_view::npos; at = text.find(kLead, at + 1)) {
    size_t i = at + kLead.size();
    ArithmeticQuestion q;
    if (!number(text, &i, &q.a) || i + 3 > text.size() || text[i] != ' ') continue;
    q.op = text[i + 1];
    if ((q.op != '+' && q.op != '-' && q.op != '*') || text[i + 2] != ' ') continue;
    i += 3;
    if (!number(text, &i, &q.b) || i >= text.size() || text[i] != '?') continue;
    return q;
  }
  return std::nullopt;
}

std::string AnswerArithmetic(const ArithmeticQuestion& question, double accuracy, uint64_t seed) {
  const int64_t correct = question.op == '+'   ? question.a + question.b
                          : question.op == '-' ? question.a - question.b
                                               : question.a * question.b;
  uint64_t z = seed ^ (static_cast<uint64_t>(question.a) * 0x9e3779b97f4a7c15ULL) ^
               (static_cast<uint64_t>(question.b) * 0xc2b2ae3d27d4eb4fULL) ^
               static_cast<uint64_t>(question.op);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  const double draw = static_cast<double>(z >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  if (draw < accuracy) return std::to_string(correct);
  return std::to_string(correct + 1 + static_cast<int64_t>(z % 9));
}

ErrorReply MakeError(unsigned status, std::string_view type, std::string_view message) {
  OrderedJson body = {
      {"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}};
  return {status, body.dump()};
}

std::variant<CompletionRequest, ErrorReply> ParseCompletionRequest(
    Api api, std::string_view body, const std::string& model_name, int64_t max_model_len,
    const std::vector<std::string>& adapters) {
  if (auto fast = FastParseCompletionRequest(api, body, model_name, max_model_len, adapters)) {
    return *fast;
  }
  const Json request = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) return BadRequest("Request body is not valid JSON.");
  if (!request.is_object()) return BadRequest("Request body must be a JSON object.");

  CompletionRequest out;
  out.api = api;
  if (const Json* model = Field(request, "model")) {
    if (!model->is_string()) return BadRequest("`model` must be a string.");
    out.adapter = ServedAs(model->get_ref<const std::string&>(), model_name, adapters);
    if (out.adapter == kNotServed) {
      return MakeError(404, "NotFoundError",
                       fmt::format("The model `{}` does not exist.", model->get<std::string>()));
    }
  }

  const char* prompt_field = api == Api::kChat ? "messages" : "prompt";
  const Json* prompt = Field(request, prompt_field);
  if (prompt == nullptr) return BadRequest(fmt::format("`{}` is required.", prompt_field));
  const std::optional<int64_t> prompt_tok = api == Api::kChat
                                                ? ChatPromptTokens(*prompt, &out.question)
                                                : PromptTokens(*prompt, &out.question);
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
  OrderedJson model = {{"id", model_name},
                       {"object", "model"},
                       {"created", created_s},
                       {"owned_by", "servesweep-sim"},
                       {"root", model_name},
                       {"parent", nullptr},
                       {"max_model_len", max_model_len}};
  OrderedJson list = {{"object", "list"}, {"data", OrderedJson::array({model})}};
  return list.dump();
}

ResponseRenderer::ResponseRenderer(Api api, uint64_t seq, int64_t created_s,
                                   std::string_view model_json)
    : api_(api),
      created_s_(created_s),
      model_json_(model_json),
      id_(fmt::format("{}-{}", api == Api::kChat ? "chatcmpl" : "cmpl", seq)),
      head_(fmt::format("data: {{\"id\":\"{}\",\"object\":\"{}\",\"created\":{},\"model\":{},", id_,
                        api == Api::kChat ? "chat.completion.chunk" : "text_completion", created_s,
                        model_json)) {}

void ResponseRenderer::AppendRoleEvent(std::string& out) const {
  out += head_;
  out +=
      "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
      "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n";
}

void ResponseRenderer::AppendTokenEvent(std::string& out, int64_t first_tok, int64_t count,
                                        bool last) const {
  out += head_;
  out += api_ == Api::kChat
             ? std::string_view("\"choices\":[{\"index\":0,\"delta\":{\"content\":\"")
             : std::string_view("\"choices\":[{\"index\":0,\"text\":\"");
  for (int64_t k = first_tok; k < first_tok + count; ++k) {
    if (k == 0 && !first_token_text_.empty()) {
      out += first_token_text_;
      continue;
    }
    out += " t";
    AppendInt(out, k);
  }
  out += api_ == Api::kChat ? std::string_view("\"}") : std::string_view("\"");
  out += last ? std::string_view(
                    ",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}],"
                    "\"usage\":null}\n\n")
              : std::string_view(
                    ",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}],"
                    "\"usage\":null}\n\n");
}

void ResponseRenderer::AppendUsageEvent(std::string& out, int64_t prompt_tok,
                                        int64_t completion_tok) const {
  out += head_;
  fmt::format_to(std::back_inserter(out),
                 "\"choices\":[],\"usage\":{{\"prompt_tokens\":{},\"total_tokens\":{},"
                 "\"completion_tokens\":{}}}}}\n\n",
                 prompt_tok, prompt_tok + completion_tok, completion_tok);
}

void ResponseRenderer::AppendDoneEvent(std::string& out) { out += "data: [DONE]\n\n"; }

std::string ResponseRenderer::RenderResponse(int64_t prompt_tok, int64_t completion_tok) const {
  std::string text;
  for (int64_t k = 0; k < completion_tok; ++k) {
    text += k == 0 && !first_token_text_.empty() ? first_token_text_ : TokenText(k);
  }
  OrderedJson choice = {{"index", 0}};
  if (api_ == Api::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}, {"tool_calls", Json::array()}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = "length";
  choice["stop_reason"] = nullptr;
  OrderedJson response = {{"id", id()},
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

std::vector<uint64_t> PromptBlockHashes(Api api, std::string_view body, int64_t block_tok) {
  if (block_tok <= 0) return {};
  const Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return {};
  BlockHasher hasher(block_tok);
  if (api == Api::kChat) {
    auto messages = json.find("messages");
    if (messages == json.end() || !messages->is_array()) return {};
    for (const Json& message : *messages) {
      if (!message.is_object()) continue;
      auto content = message.find("content");
      if (content != message.end() && content->is_string()) {
        hasher.AddWords(content->get_ref<const std::string&>());
      }
    }
  } else {
    auto prompt = json.find("prompt");
    if (prompt == json.end()) return {};
    HashPrompt(*prompt, hasher);
  }
  return hasher.Take();
}

}  // namespace servesweep::sim
