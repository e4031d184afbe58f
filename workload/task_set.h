// Quality task sets: questions with known answers, sent at temperature 0 after a run's measured
// phase so that a speed-up is judged beside its answer quality (docs/quality.md).
//
// Two sources: a generated arithmetic set ("What is 37 + 58?"), reproducible from a seed on
// every machine, and a JSONL file of {"prompt": ..., "answer": ...} lines. Scoring is an exact
// match after normalisation: surrounding whitespace trimmed, and for numeric answers the first
// number of the reply compared with the answer's.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace servesweep::workload {

struct QualityTask {
  std::string prompt;
  std::string answer;
};

// `count` arithmetic questions (addition, subtraction, multiplication of small integers) in the
// shipped format: "Question: What is A <op> B? Reply with the number only.\nAnswer:". The same
// (count, seed) gives the same tasks everywhere (the generator is hand-written, no std::
// distribution).
std::vector<QualityTask> GenerateArithmeticTasks(uint32_t count, uint64_t seed);

// Reads up to max_tasks tasks (0 = all) from a JSONL file: one object per line with string
// "prompt" and "answer" (a number is accepted as the answer and kept as written); blank lines
// are skipped. Errors name file:line, what was expected and what was found.
Status LoadTaskJsonl(const std::string& path, size_t max_tasks, std::vector<QualityTask>* out);

// The first number in text that does not continue a word ("t0" holds none): an optional '-',
// digits, an optional fraction; trailing fractional zeros dropped ("95.0" -> "95").
std::optional<std::string> FirstNumber(std::string_view text);

// Trims ASCII whitespace at both ends.
std::string_view TrimAnswer(std::string_view text);

// Exact match after normalisation: numeric compares FirstNumber of both, else the trimmed texts.
bool AnswerMatches(std::string_view expected, std::string_view reply, bool numeric);

}  // namespace servesweep::workload
