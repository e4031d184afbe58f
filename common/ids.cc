#include "common/ids.h"

#include <cstdint>
#include <random>

namespace servesweep {

uint64_t StableHash64(std::string_view bytes, uint64_t basis) {
  uint64_t hash = basis;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string StableHashHex(std::string_view bytes) {
  uint64_t hash = StableHash64(bytes);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[i] = kDigits[hash & 0xf];
    hash >>= 4;
  }
  return out;
}

std::string RandomHex(size_t length) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::random_device device;
  std::string out(length, '0');
  for (auto& c : out) c = kDigits[device() & 0xf];
  return out;
}

}  // namespace servesweep
