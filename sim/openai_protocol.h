// The OpenAI wire format as vLLM speaks it: request parsing with the emulator's token
// accounting (one token per whitespace-separated word, or per token id), and rendering of SSE
// events, non-streaming responses, error bodies and the model list.
//
// Thread-safety: free functions are pure; a ResponseRenderer is immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace servesweep::sim {

enum class Api { kCompletions, kChat };

struct CompletionRequest {
  Api api = Api::kCompletions;
  int64_t prompt_tok = 0;
  int64_t max_tok = 16;  // output is exactly this many tokens (the emulator never stops early)
  bool stream = false;
  bool include_usage = false;
};

struct ErrorReply {
  unsigned status = 400;
  std::string body;  // {"error":{"message":...,"type":...,"param":null,"code":status}}
};

ErrorReply MakeError(unsigned status, std::string_view type, std::string_view message);

// Parses a /v1/completions or /v1/chat/completions body; on failure returns the reply vLLM
// would send (400 for malformed requests, 404 for an unknown model).
std::variant<CompletionRequest, ErrorReply> ParseCompletionRequest(Api api, std::string_view body,
                                                                   const std::string& model_name,
                                                                   int64_t max_model_len);

std::string RenderModelList(const std::string& model_name, int64_t created_s,
                            int64_t max_model_len);

// Renders the events and the response of one request. Token k's text is " t<k>".
class ResponseRenderer {
 public:
  // model_json: the model name as a JSON string literal; must outlive the renderer.
  ResponseRenderer(Api api, uint64_t seq, int64_t created_s, std::string_view model_json);

  std::string id() const;  // "cmpl-<seq>" or "chatcmpl-<seq>"

  // Chat only: the role-only delta vLLM sends just before the first content chunk.
  void AppendRoleEvent(std::string& out) const;
  // Token k's chunk; the last one carries finish_reason "length".
  void AppendTokenEvent(std::string& out, int64_t k, bool last) const;
  void AppendUsageEvent(std::string& out, int64_t prompt_tok, int64_t completion_tok) const;
  static void AppendDoneEvent(std::string& out);

  // The whole non-streaming response body.
  std::string RenderResponse(int64_t prompt_tok, int64_t completion_tok) const;

 private:
  void AppendChunkHead(std::string& out) const;

  Api api_;
  uint64_t seq_;
  int64_t created_s_;
  std::string_view model_json_;
};

}  // namespace servesweep::sim
