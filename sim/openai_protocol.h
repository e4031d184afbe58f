// The OpenAI wire format as vLLM speaks it: request parsing with the emulator's token
// accounting (one token per whitespace-separated word, or per token id), and rendering of SSE
// events, non-streaming responses, error bodies and the model list.
//
// Thread-safety: free functions are pure; a ResponseRenderer is immutable after construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace servesweep::sim {

enum class Api { kCompletions, kChat };

// An arithmetic question in the quality task set's format ("What is 37 + 58?";
// workload/task_set.h): the emulator can answer it (EmulatorSettings::answer_accuracy).
struct ArithmeticQuestion {
  int64_t a = 0;
  char op = '+';  // '+', '-' or '*'
  int64_t b = 0;
};

// The first "What is A <op> B?" in text (A and B non-negative integers of at most 9 digits).
std::optional<ArithmeticQuestion> FindArithmeticQuestion(std::string_view text);

// The emulator's answer: the correct number with probability `accuracy`, else a wrong one; the
// draw is a hash of (seed, question), so a question is answered the same way every time, as a
// model at temperature 0 would.
std::string AnswerArithmetic(const ArithmeticQuestion& question, double accuracy, uint64_t seed);

struct CompletionRequest {
  Api api = Api::kCompletions;
  int32_t adapter = -1;  // the LoRA adapter `model` named (index into the served adapters)
  int64_t prompt_tok = 0;
  int64_t max_tok = 16;  // output is exactly this many tokens (the emulator never stops early)
  bool stream = false;
  bool include_usage = false;
  std::optional<ArithmeticQuestion> question;  // found in the prompt (the last message for chat)
};

struct ErrorReply {
  unsigned status = 400;
  std::string body;  // {"error":{"message":...,"type":...,"param":null,"code":status}}
};

ErrorReply MakeError(unsigned status, std::string_view type, std::string_view message);

// Parses a /v1/completions or /v1/chat/completions body; on failure returns the reply vLLM
// would send (400 for malformed requests, 404 for an unknown model).
// `model` may also name one of `adapters` (LoRA adapters, served as models of their own the way
// vLLM serves them): CompletionRequest::adapter says which.
std::variant<CompletionRequest, ErrorReply> ParseCompletionRequest(
    Api api, std::string_view body, const std::string& model_name, int64_t max_model_len,
    const std::vector<std::string>& adapters = {});

// The chained hashes of the prompt's full blocks of `block_tok` tokens, as an engine's prefix
// cache keys them: hash k covers tokens 0 .. (k+1) * block_tok - 1 (words of a text prompt or
// of the chat messages' contents, or token ids), so equal prompt prefixes give equal leading
// hashes. Empty for a malformed body or a prompt shorter than one block. Parses the JSON:
// for the performance-model core only, not on the fixed schedule's fast path.
std::vector<uint64_t> PromptBlockHashes(Api api, std::string_view body, int64_t block_tok);

std::string RenderModelList(const std::string& model_name, int64_t created_s,
                            int64_t max_model_len);

// The allocation-free fast path of ParseCompletionRequest: it decides only well-formed requests
// of the usual shapes (no \u escapes or non-ASCII bytes in strings, no duplicate fields that
// matter, no errors) and returns nullopt for everything else, which the JSON DOM path then
// decides. Whenever it answers, it answers exactly as the DOM path would. Exposed for tests.
std::optional<CompletionRequest> FastParseCompletionRequest(
    Api api, std::string_view body, std::string_view model_name, int64_t max_model_len,
    const std::vector<std::string>& adapters = {});

// Renders the events and the response of one request. Token k's text is " t<k>". The event
// head (id, object, created, model) is rendered once, at construction.
class ResponseRenderer {
 public:
  ResponseRenderer(Api api, uint64_t seq, int64_t created_s, std::string_view model_json);

  const std::string& id() const { return id_; }  // "cmpl-<seq>" or "chatcmpl-<seq>"

  // Chat only: the role-only delta vLLM sends just before the first content chunk.
  void AppendRoleEvent(std::string& out) const;
  // One event carrying tokens first_tok .. first_tok + count - 1 (count > 1 under speculative
  // decoding: vLLM sends a step's tokens as one chunk); the last carries finish_reason "length".
  void AppendTokenEvent(std::string& out, int64_t first_tok, int64_t count, bool last) const;
  void AppendUsageEvent(std::string& out, int64_t prompt_tok, int64_t completion_tok) const;
  static void AppendDoneEvent(std::string& out);

  // Replaces token 0's text (" t0"), e.g. with " 95" to answer a question; JSON-safe text only.
  void set_first_token_text(std::string text) { first_token_text_ = std::move(text); }

  // The whole non-streaming response body.
  std::string RenderResponse(int64_t prompt_tok, int64_t completion_tok) const;

 private:
  Api api_;
  int64_t created_s_;
  std::string_view model_json_;  // must outlive the renderer
  std::string id_;
  std::string first_token_text_;  // "" = " t0"
  std::string head_;              // `data: {"id":...,"object":...,"created":...,"model":...,`
};

}  // namespace servesweep::sim
