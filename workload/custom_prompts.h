// Custom prompts from a JSONL file (`prompts: jsonl:<file>`, `servesweep bench --prompts`):
// one JSON object per line, either {"prompt": "text"} or {"messages": [{"role": ..., "content":
// ...}, ...]}, with an optional "max_tokens" (or its synonym "output_len"): that request's output
// length. Blank lines are skipped. A bad line is an error naming file:line and what was
// expected. The coordinator reads the file and ships the lines in the run spec, so agents need
// no copy of it.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace servesweep::workload {

struct CustomPromptLine {
  std::string prompt;         // when the line has "prompt"
  std::string messages_json;  // when the line has "messages": the array, compact JSON
  uint32_t max_tokens = 0;    // 0 = the run's output length
};

// Parses JSONL text; `path` names the file in messages.
Status ParseCustomPrompts(const std::string& text, const std::string& path,
                          std::vector<CustomPromptLine>* out);
// Reads and parses a file.
Status ReadCustomPrompts(const std::string& path, std::vector<CustomPromptLine>* out);

// "jsonl:<file>" -> <file>; false when `spec` has another form.
bool ParsePromptsSpec(const std::string& spec, std::string* path);

}  // namespace servesweep::workload
