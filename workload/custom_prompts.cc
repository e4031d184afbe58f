#include "workload/custom_prompts.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file_text.h"

namespace servesweep::workload {

Status ParseCustomPrompts(const std::string& text, const std::string& path,
                          std::vector<CustomPromptLine>* out) {
  out->clear();
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  auto fail = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("{}:{}: {}", path, line_no, what));
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
    if (doc.is_discarded()) return fail("expected a JSON object, found text that is not JSON");
    if (!doc.is_object()) {
      return fail(fmt::format("expected a JSON object, found {}", doc.type_name()));
    }
    CustomPromptLine entry;
    const bool has_prompt = doc.contains("prompt"), has_messages = doc.contains("messages");
    if (has_prompt == has_messages) {
      return fail(has_prompt ? "expected either \"prompt\" or \"messages\", found both"
                             : "expected \"prompt\" (text) or \"messages\" (a chat array), "
                               "found neither");
    }
    for (const auto& [key, value] : doc.items()) {
      if (key != "prompt" && key != "messages" && key != "max_tokens" && key != "output_len") {
        return fail(
            fmt::format("unknown key \"{}\"; expected prompt, messages, max_tokens or "
                        "output_len",
                        key));
      }
    }
    if (has_prompt) {
      const auto& prompt = doc["prompt"];
      if (!prompt.is_string() || prompt.get_ref<const std::string&>().empty()) {
        return fail(fmt::format("expected \"prompt\" to be a non-empty string, found {}",
                                prompt.is_string() ? "\"\"" : prompt.type_name()));
      }
      entry.prompt = prompt.get<std::string>();
    } else {
      const auto& messages = doc["messages"];
      if (!messages.is_array() || messages.empty()) {
        return fail(fmt::format("expected \"messages\" to be a non-empty array, found {}",
                                messages.is_array() ? "[]" : messages.type_name()));
      }
      for (size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
            !m.contains("content") || !(m["content"].is_string() || m["content"].is_array())) {
          return fail(
              fmt::format("expected messages[{}] to be {{\"role\": string, \"content\": "
                          "string or array}}, found {}",
                          i, m.dump()));
        }
      }
      entry.messages_json = messages.dump();
    }
    for (const char* key : {"max_tokens", "output_len"}) {
      if (!doc.contains(key)) continue;
      const auto& v = doc[key];
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > 10'000'000) {
        return fail(
            fmt::format("expected \"{}\" to be a positive integer, found {}", key, v.dump()));
      }
      entry.max_tokens = static_cast<uint32_t>(v.get<int64_t>());
    }
    out->push_back(std::move(entry));
  }
  if (out->empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: expected at least one prompt line, found none", path));
  }
  return Status::Ok();
}

Status ReadCustomPrompts(const std::string& path, std::vector<CustomPromptLine>* out) {
  std::string text;
  if (Status s = ReadWholeFile(path, "the prompts file", &text); !s.ok()) return s;
  return ParseCustomPrompts(text, path, out);
}

bool ParsePromptsSpec(const std::string& spec, std::string* path) {
  constexpr std::string_view kPrefix = "jsonl:";
  if (spec.rfind(kPrefix, 0) != 0 || spec.size() == kPrefix.size()) return false;
  *path = spec.substr(kPrefix.size());
  return true;
}

}  // namespace servesweep::workload
