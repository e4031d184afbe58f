#include "common/ids.h"

#include <cstdint>
#include <random>

namespace servesweep {

std::string StableHashHex(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
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
