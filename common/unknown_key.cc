#include "common/unknown_key.h"

#include <fmt/format.h>

#include <algorithm>

namespace servesweep {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string UnknownKeyMessage(const std::string& key, const std::string& section,
                              const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = 3;  // suggest only close matches
  std::string expected;
  for (const auto& candidate : known) {
    const size_t d = EditDistance(key, candidate);
    if (d < best_distance) best_distance = d, best = candidate;
    expected += (expected.empty() ? "" : ", ") + candidate;
  }
  return fmt::format("unknown key '{}' in {}{}; expected one of: {}", key, section,
                     best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best), expected);
}

}  // namespace servesweep
