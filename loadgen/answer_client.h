// Asks an OpenAI-compatible endpoint a list of prompts and returns each reply's text: the
// client of the quality gate (docs/quality.md). Non-streaming requests at temperature 0, at
// most `concurrency` in flight; nothing is timed. Like the load generator it knows a URL, never
// an engine.
//
// Thread-safety: AskAll blocks and shares nothing between calls; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loadgen/load_generator.h"

namespace servesweep::loadgen {

struct AnswerSettings {
  std::string base_url;  // e.g. "http://127.0.0.1:8000" (no trailing /v1)
  Api api = Api::kCompletions;
  std::string model;
  std::string api_key;  // sent as a bearer token; never logged
  uint32_t max_tokens = 16;
  uint32_t concurrency = 8;
  double request_timeout_s = 120;
};

struct Answer {
  bool ok = false;
  std::string text;   // completions: choices[0].text; chat: choices[0].message.content
  std::string error;  // when !ok: HTTP status and body, or the transport error
};

// One answer per prompt, in order. Failed requests are recorded, never thrown.
std::vector<Answer> AskAll(const AnswerSettings& settings, const std::vector<std::string>& prompts);

// The text of a non-streaming completions or chat completions response body; false if the body
// holds neither.
bool ParseAnswerText(const std::string& body, std::string* text);

}  // namespace servesweep::loadgen
