#include "workload/task_set.h"

#include <fmt/format.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

namespace servesweep::workload {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [low, high] (the modulo bias is negligible for these small ranges).
int64_t Between(uint64_t* state, int64_t low, int64_t high) {
  return low + static_cast<int64_t>(SplitMix64(state) % static_cast<uint64_t>(high - low + 1));
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Shorten(const std::string& text) {
  return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

}  // namespace

std::vector<QualityTask> GenerateArithmeticTasks(uint32_t count, uint64_t seed) {
  std::vector<QualityTask> tasks;
  tasks.reserve(count);
  uint64_t state = seed ^ 0x51a7ca1c0ffee000ULL;
  for (uint32_t i = 0; i < count; ++i) {
    const int64_t op = Between(&state, 0, 2);
    int64_t a = 0, b = 0, answer = 0;
    char symbol = '+';
    if (op == 0) {
      a = Between(&state, 10, 999);
      b = Between(&state, 10, 999);
      answer = a + b;
    } else if (op == 1) {
      a = Between(&state, 10, 999);
      b = Between(&state, 10, 999);
      symbol = '-';
      answer = a - b;
    } else {
      a = Between(&state, 2, 99);
      b = Between(&state, 2, 99);
      symbol = '*';
      answer = a * b;
    }
    tasks.push_back({fmt::format("Question: What is {} {} {}? Reply with the number only.\nAnswer:",
                                 a, symbol, b),
                     std::to_string(answer)});
  }
  return tasks;
}

Status LoadTaskJsonl(const std::string& path, size_t max_tasks, std::vector<QualityTask>* out) {
  out->clear();
  std::ifstream in(path);
  if (!in)
    return Status::NotFound(fmt::format(
        "{}: cannot open the task set (JSONL of {{\"prompt\", \"answer\"}} lines)", path));
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (TrimAnswer(line).empty()) continue;
    if (max_tasks > 0 && out->size() >= max_tasks) break;
    const auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = fmt::format("{}:{}", path, line_no);
    if (json.is_discarded() || !json.is_object()) {
      return Status::InvalidArgument(
          fmt::format("{}: expected a JSON object {{\"prompt\": ..., \"answer\": ...}}, found '{}'",
                      where, Shorten(line)));
    }
    const auto prompt = json.find("prompt");
    if (prompt == json.end() || !prompt->is_string() ||
        prompt->get_ref<const std::string&>().empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: expected a non-empty string \"prompt\", found {}", where,
                      prompt == json.end() ? "none" : Shorten(prompt->dump())));
    }
    const auto answer = json.find("answer");
    std::string answer_text;
    if (answer != json.end() && answer->is_string()) {
      answer_text = answer->get<std::string>();
    } else if (answer != json.end() && answer->is_number()) {
      answer_text = answer->dump();
    } else {
      return Status::InvalidArgument(
          fmt::format("{}: expected a string or number \"answer\", found {}", where,
                      answer == json.end() ? "none" : Shorten(answer->dump())));
    }
    if (TrimAnswer(answer_text).empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: expected a non-empty \"answer\", found \"\"", where));
    }
    out->push_back({prompt->get<std::string>(), std::move(answer_text)});
  }
  if (out->empty())
    return Status::InvalidArgument(fmt::format("{}: expected at least one task, found none", path));
  return Status::Ok();
}

std::optional<std::string> FirstNumber(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const bool minus = text[i] == '-' && i + 1 < text.size() && IsDigit(text[i + 1]);
    if (!minus && !IsDigit(text[i])) continue;
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_' ||
                  text[i - 1] == '.')) {
      // Inside a word ("t0") or a number already passed over: skip to the end of the word.
      while (i + 1 < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '.')) {
        ++i;
      }
      continue;
    }
    size_t end = i + (minus ? 1 : 0);
    while (end < text.size() && IsDigit(text[end])) ++end;
    std::string number(text.substr(i, end - i));
    if (end + 1 < text.size() && text[end] == '.' && IsDigit(text[end + 1])) {
      size_t frac_end = end + 1;
      while (frac_end < text.size() && IsDigit(text[frac_end])) ++frac_end;
      std::string fraction(text.substr(end + 1, frac_end - end - 1));
      while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
      if (!fraction.empty()) number += "." + fraction;
    }
    if (number == "-0") number = "0";
    return number;
  }
  return std::nullopt;
}

std::string_view TrimAnswer(std::string_view text) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

bool AnswerMatches(std::string_view expected, std::string_view reply, bool numeric) {
  if (!numeric) return TrimAnswer(expected) == TrimAnswer(reply);
  const auto want = FirstNumber(expected);
  const auto got = FirstNumber(reply);
  return want.has_value() && got.has_value() && *want == *got;
}

}  // namespace servesweep::workload
