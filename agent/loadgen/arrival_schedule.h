// Request arrival times for the open loop: a Poisson process on an ABSOLUTE schedule.
//
// t_0 = 0 and t_i = t_{i-1} + gap_i with gap_i ~ Exp(rate), drawn from std::mt19937_64 seeded
// by `seed`. The sum is kept in double seconds and each t_i rounded on its own, so rounding
// never accumulates; the load loop sends request i at t0 + t_i whatever happened before, so a
// late send never delays the ones after it (a "sleep gap_i after the last send" loop drifts).
// Unlike vLLM we do not rescale the gaps so that t_{n-1} lands on n / rate: the arrivals stay a
// real Poisson process, and the seed alone fixes them. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace servesweep::loadgen {

// Offsets in ns from the start of the measured phase. rate_per_s = +inf gives all zeros
// (everything at once, as vLLM's default --request-rate inf). Requires rate_per_s > 0.
std::vector<int64_t> PoissonScheduleNs(uint32_t count, double rate_per_s, uint64_t seed);

// One exponential gap in seconds from a uniform 64-bit draw; exposed for the tests.
double ExponentialGapS(uint64_t uniform_bits, double rate_per_s);

// Gamma arrivals, as `vllm bench serve --burstiness`: gaps ~ Gamma(shape = burstiness,
// scale = 1 / (rate x burstiness)), so the mean rate is unchanged and the gaps' coefficient of
// variation is 1 / sqrt(burstiness): < 1 burstier than Poisson, > 1 more regular, 1 exactly
// PoissonScheduleNs. Sampled by hand (Marsaglia-Tsang) from the same seeded generator, so the
// schedule is the same on every platform. Absolute, like the Poisson schedule.
std::vector<int64_t> GammaScheduleNs(uint32_t count, double rate_per_s, double burstiness,
                                     uint64_t seed);

}  // namespace servesweep::loadgen
