#include "agent/loadgen/prompt_builder.h"

#include <array>
#include <random>
#include <string_view>

namespace servesweep::loadgen {
namespace {

// Short, common English words: every tokenizer we know maps each to one or two tokens.
constexpr std::array<std::string_view, kVocabSize> kVocab = {
    "the",   "of",    "and",   "to",    "in",    "is",    "it",    "that",  "was",   "for",
    "on",    "are",   "with",  "as",    "his",   "they",  "be",    "at",    "one",   "have",
    "this",  "from",  "or",    "had",   "by",    "hot",   "word",  "but",   "what",  "some",
    "we",    "can",   "out",   "other", "were",  "all",   "there", "when",  "up",    "use",
    "your",  "how",   "said",  "an",    "each",  "she",   "which", "do",    "their", "time",
    "if",    "will",  "way",   "about", "many",  "then",  "them",  "write", "would", "like",
    "so",    "these", "her",   "long"};

}  // namespace

std::string BuildPrompt(uint64_t seed, uint64_t index, uint32_t len_tok) {
  std::string prompt;
  prompt.reserve(static_cast<size_t>(len_tok) * 6);
  // Mixing the index into the seed gives each request its own stream of words.
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
  // A fixed number of digit words, so that no index's digits are a prefix of another's.
  uint64_t rest = index;
  for (uint32_t i = 0; i < len_tok; ++i) {
    if (i) prompt.push_back(' ');
    uint64_t word = rng() % kVocabSize;   // 64 divides 2^64: no modulo bias
    if (i < kIndexWords) {
      // Offset by the seed so different seeds start differently too.
      word = (rest + (seed >> (6 * i))) % kVocabSize;   // least significant digit first
      rest /= kVocabSize;
    }
    prompt.append(kVocab[word]);
  }
  return prompt;
}

std::vector<uint32_t> BuildPromptTokenIds(uint64_t seed, uint64_t index, uint32_t len_tok) {
  std::vector<uint32_t> ids;
  ids.reserve(len_tok);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
  uint64_t rest = index;
  for (uint32_t i = 0; i < len_tok; ++i) {
    uint64_t id = rng() % kTokenIdRange;   // a power of two: no modulo bias
    if (i < kIndexWords) {
      id = (rest + (seed >> (14 * i))) % kTokenIdRange;
      rest /= kTokenIdRange;
    }
    ids.push_back(kFirstTokenId + static_cast<uint32_t>(id));
  }
  return ids;
}

}  // namespace servesweep::loadgen
