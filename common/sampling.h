// Random variates drawn by hand from std::mt19937_64 (whose output the standard fixes), because
// the std:: distributions' output differs between standard libraries: a seed must give the same
// workload and the same arrival schedule on every machine.
//
// Thread-safety: pure functions of the generator passed in.
#pragma once

#include <cmath>
#include <random>

namespace servesweep {

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
