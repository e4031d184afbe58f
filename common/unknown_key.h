// The error for a key nobody asked for, with a did-you-mean: one wording for every parser
// (matrices, profiles, flag tables).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace servesweep {

// Levenshtein distance between two strings.
size_t EditDistance(const std::string& a, const std::string& b);

// "unknown key 'KEY' in SECTION (did you mean 'CLOSEST'?); expected one of: A, B, ..."; the
// suggestion only when a known key is within two edits.
std::string UnknownKeyMessage(const std::string& key, const std::string& section,
                              const std::vector<std::string>& known);

}  // namespace servesweep
