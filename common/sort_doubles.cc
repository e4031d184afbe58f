#include "common/sort_doubles.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <utility>

namespace servesweep {
namespace {

// Below this many values std::sort is as fast (the radix passes' fixed cost dominates).
constexpr size_t kRadixFrom = 1024;
constexpr int kDigitBits = 11;  // 6 passes of 2,048 buckets cover 64 bits
constexpr int kPasses = 6;
constexpr uint64_t kDigitMask = (uint64_t{1} << kDigitBits) - 1;
constexpr uint64_t kSign = uint64_t{1} << 63;

// A key whose unsigned order is the numbers' order: negative values have every bit flipped
// (larger magnitude, smaller key), positive ones only the sign bit.
uint64_t KeyOf(double v) {
  const auto bits = std::bit_cast<uint64_t>(v);
  return (bits & kSign) != 0 ? ~bits : bits | kSign;
}
double ValueOf(uint64_t key) {
  return std::bit_cast<double>((key & kSign) != 0 ? key & ~kSign : ~key);
}

}  // namespace

void SortDoubles(std::vector<double>* values) {
  const size_t n = values->size();
  if (n < kRadixFrom) {
    std::sort(values->begin(), values->end());
    return;
  }
  std::vector<uint64_t> keys(n), scratch(n);
  std::array<std::array<size_t, kDigitMask + 1>, kPasses> counts{};
  for (size_t i = 0; i < n; ++i) {
    keys[i] = KeyOf((*values)[i]);
    for (int p = 0; p < kPasses; ++p) ++counts[p][(keys[i] >> (p * kDigitBits)) & kDigitMask];
  }
  for (int p = 0; p < kPasses; ++p) {
    auto& count = counts[p];
    // A digit every key shares (the exponent's high bits, mostly) orders nothing: skip it.
    if (count[(keys[0] >> (p * kDigitBits)) & kDigitMask] == n) continue;
    size_t at = 0;
    for (size_t& c : count) at += std::exchange(c, at);
    for (const uint64_t key : keys) scratch[count[(key >> (p * kDigitBits)) & kDigitMask]++] = key;
    keys.swap(scratch);
  }
  for (size_t i = 0; i < n; ++i) (*values)[i] = ValueOf(keys[i]);
}

}  // namespace servesweep
