#include "loadgen/prompt_builder.h"

#include <algorithm>
#include <array>
#include <random>
#include <string_view>

namespace servesweep::loadgen {
namespace {

// Short, common English words: every tokenizer we know maps each to one or two tokens.
constexpr std::array<std::string_view, kVocabSize> kVocab = {
    "the",   "of",   "and",   "to",    "in",    "is",   "it",    "that", "was",  "for",   "on",
    "are",   "with", "as",    "his",   "they",  "be",   "at",    "one",  "have", "this",  "from",
    "or",    "had",  "by",    "hot",   "word",  "but",  "what",  "some", "we",   "can",   "out",
    "other", "were", "all",   "there", "when",  "up",   "use",   "your", "how",  "said",  "an",
    "each",  "she",  "which", "do",    "their", "time", "if",    "will", "way",  "about", "many",
    "then",  "them", "write", "would", "like",  "so",   "these", "her",  "long"};

// Token t of a shared prefix: a pure function of its block's id and its place in the block.
uint64_t PrefixDraw(const PromptPrefix& prefix, uint32_t t) {
  uint64_t x =
      (*prefix.blocks)[t / kPrefixBlockTok] + (t % kPrefixBlockTok) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 30;  // splitmix64's finaliser
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// How many leading tokens come from the prefix blocks.
uint32_t PrefixTokens(const PromptPrefix& prefix, uint32_t len_tok) {
  if (!prefix.blocks || prefix.blocks->empty()) return 0;
  return std::min(
      {prefix.len_tok, len_tok, static_cast<uint32_t>(prefix.blocks->size()) * kPrefixBlockTok});
}

}  // namespace

std::string BuildPrompt(uint64_t seed, uint64_t index, uint32_t len_tok,
                        const PromptPrefix& prefix) {
  std::string prompt;
  AppendPrompt(seed, index, len_tok, prefix, &prompt);
  return prompt;
}

void AppendPrompt(uint64_t seed, uint64_t index, uint32_t len_tok, const PromptPrefix& prefix,
                  std::string* out) {
  std::string& prompt = *out;
  prompt.reserve(prompt.size() + static_cast<size_t>(len_tok) * 6);
  const uint32_t shared = PrefixTokens(prefix, len_tok);
  for (uint32_t t = 0; t < shared; ++t) {
    if (t) prompt.push_back(' ');
    prompt.append(kVocab[PrefixDraw(prefix, t) % kVocabSize]);
  }
  // Mixing the index into the seed gives each request its own stream of words.
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
  // A fixed number of digit words, so that no index's digits are a prefix of another's.
  uint64_t rest = index;
  for (uint32_t i = 0; i < len_tok - shared; ++i) {
    if (i || shared) prompt.push_back(' ');
    uint64_t word = rng() % kVocabSize;  // 64 divides 2^64: no modulo bias
    if (i < kIndexWords) {
      // Offset by the seed so different seeds start differently too.
      word = (rest + (seed >> (6 * i))) % kVocabSize;  // least significant digit first
      rest /= kVocabSize;
    }
    prompt.append(kVocab[word]);
  }
}

std::vector<uint32_t> BuildPromptTokenIds(uint64_t seed, uint64_t index, uint32_t len_tok,
                                          const PromptPrefix& prefix) {
  std::vector<uint32_t> ids;
  ids.reserve(len_tok);
  const uint32_t shared = PrefixTokens(prefix, len_tok);
  for (uint32_t t = 0; t < shared; ++t) {
    ids.push_back(kFirstTokenId + static_cast<uint32_t>(PrefixDraw(prefix, t) % kTokenIdRange));
  }
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
  uint64_t rest = index;
  for (uint32_t i = 0; i < len_tok - shared; ++i) {
    uint64_t id = rng() % kTokenIdRange;  // a power of two: no modulo bias
    if (i < kIndexWords) {
      id = (rest + (seed >> (14 * i))) % kTokenIdRange;
      rest /= kTokenIdRange;
    }
    ids.push_back(kFirstTokenId + static_cast<uint32_t>(id));
  }
  return ids;
}

}  // namespace servesweep::loadgen
