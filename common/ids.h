// Identifiers: random ids for agents, stable content hashes for runs and matrices.
//
// Thread-safety: free functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace servesweep {

// 64-bit FNV-1a of the bytes. Stable across runs and hosts.
uint64_t StableHash64(std::string_view bytes, uint64_t basis = 0xcbf29ce484222325ULL);
// The same, as 16 lowercase hex digits.
std::string StableHashHex(std::string_view bytes);

// `length` random lowercase hex digits from the OS entropy source.
std::string RandomHex(size_t length);

}  // namespace servesweep
