// Random variates drawn by hand from std::mt19937_64 (whose output the standard fixes), because
// the std:: distributions' output differs between standard libraries: a seed must give the same
// workload and the same arrival schedule on every machine.
//
// Thread-safety: pure functions of the generator passed in.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace servesweep {

// SplitMix64 (Steele, Lea, Flood 2014): a well-mixed 64-bit hash of a counter, for draws that
// must depend on (seed, index) alone, not on the order a generator was asked in.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1]: the top 53 bits plus one, so log() of it is finite.
inline double Uniform01(std::mt19937_64& rng) {
  return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
}

// Standard normal by Box-Muller (one of the pair).
inline double StandardNormal(std::mt19937_64& rng) {
  const double u1 = Uniform01(rng), u2 = Uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

}  // namespace servesweep
