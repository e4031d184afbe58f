// The JSON body of one request (/v1/completions or /v1/chat/completions, streamed, usage asked
// for), as `vllm bench serve` sends it: model, prompt or messages, max_tokens (chat: also
// max_completion_tokens), stream, stream_options.include_usage, temperature, ignore_eos when set;
// a LoRA adapter as its engine takes it (workload/lora_choice.h: the model, or llama.cpp's lora).
//
// Built once per request on the load thread, so the common case (a generated prompt: words
// that never need escaping) is written straight into the transfer's reused buffer from parts
// prepared once per run; prompt texts, message lists and token-id prompts go through a JSON
// document. Both give the same bytes (keys in nlohmann's sorted order); request_body_test
// holds them equal.
//
// Thread-safety: const after construction; one writer may serve several threads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadgen/request_source.h"
#include "workload/load_settings.h"

namespace servesweep::loadgen {

class RequestBodyWriter {
 public:
  explicit RequestBodyWriter(const LoadSettings& s);

  // Replaces *body with the request's body.
  void Write(const RequestContent& c, std::string* body) const;
  // The same body through a JSON document: the path for prompt texts, messages and token ids,
  // and the reference the direct path is tested against.
  std::string WriteThroughJson(const RequestContent& c) const;

 private:
  // The direct path's fixed parts: head, max tokens, middle, prompt, tail; one set for the base
  // model (index 0) and one per LoRA adapter (index k + 1: its model, llama.cpp's lora field).
  struct Parts {
    std::string head, middle, tail;
    nlohmann::json lora;  // llama.cpp's lora list; null where the engine takes none
  };
  const Parts& PartsOf(int32_t adapter) const { return parts_[static_cast<size_t>(adapter + 1)]; }
  // The request's `model`, and llama.cpp's `lora` list (null where the engine takes none).
  const std::string& ModelOf(int32_t adapter) const;
  nlohmann::json LoraListOf(int32_t adapter) const;

  const LoadSettings& s_;
  bool chat_ = false;
  std::vector<Parts> parts_;
};

}  // namespace servesweep::loadgen
