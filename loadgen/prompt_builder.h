// Seeded synthetic prompts: `len_tok` words from a small fixed vocabulary, separated by single
// spaces. The emulator counts one token per whitespace-separated word, so the length is exact
// there; real tokenizers will differ and the usage chunk's prompt_tokens is what gets recorded.
//
// The first kIndexWords words spell the request's index in base kVocabSize (least significant
// first), so two requests of one run (index < 64^4, len_tok >= 4) always differ, and differ
// in their first few words: no prefix-cache block is shared between them (prefix-cache hits
// are measured apart, never mixed in by accident). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace servesweep::loadgen {

inline constexpr uint32_t kVocabSize = 64;
inline constexpr uint32_t kIndexWords = 4;

// A shared prefix: the prompt's first len_tok tokens are drawn from the block ids (token t from
// blocks[t / kPrefixBlockTok] and t % kPrefixBlockTok alone), so prompts with equal leading ids
// share those tokens; the request's own tokens (index first) follow.
inline constexpr uint32_t kPrefixBlockTok = 512;
struct PromptPrefix {
  const std::vector<uint64_t>* blocks = nullptr;
  uint32_t len_tok = 0;
};

// Same (seed, index, len_tok, prefix) -> same prompt, on every platform (std::mt19937_64 is
// fully specified; no std:: distribution is used because their output is
// implementation-defined).
std::string BuildPrompt(uint64_t seed, uint64_t index, uint32_t len_tok,
                        const PromptPrefix& prefix = {});
// The same words appended to *out (no allocation when it has room). They never need escaping
// in a JSON string.
void AppendPrompt(uint64_t seed, uint64_t index, uint32_t len_tok, const PromptPrefix& prefix,
                  std::string* out);

// The same prompt as token ids, for /v1/completions `prompt: [ids]`: exactly len_tok input
// tokens on any engine, no tokenizer needed. Ids are drawn from [kFirstTokenId, kFirstTokenId +
// kTokenIdRange), clear of the low ids vocabularies keep for special and byte tokens; the first
// kIndexWords ids encode the index as above, so prompts of one run never share a prefix block.
inline constexpr uint32_t kFirstTokenId = 1000;
inline constexpr uint32_t kTokenIdRange = 16384;
std::vector<uint32_t> BuildPromptTokenIds(uint64_t seed, uint64_t index, uint32_t len_tok,
                                          const PromptPrefix& prefix = {});

}  // namespace servesweep::loadgen
