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
#include <random>
#include <string>
#include <vector>

#include "workload/load_settings.h"

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

// --- Arrival processes with a rate profile (constant gaps, ramps) ---------------------------
//
// Gap shape: kPoisson (exponential gaps), kGamma (gamma gaps of shape `burstiness`, mean one
// gap unchanged) or kConstant (every gap exactly one mean gap).
using workload::ArrivalKind;
using workload::RampKind;

// The intended rate r(t) of an open loop: workload::RateProfile (the settings' RateProfileFor).
using workload::RateProfile;

double RateAt(const RateProfile& p, double t_s);
// Lambda(t) = integral of r over [0, t]: the expected number of arrivals by t.
double IntegratedRate(const RateProfile& p, double t_s);
// Lambda^-1(u), closed form per piece (monotone: every rate is > 0).
double InverseIntegratedRate(const RateProfile& p, double u);
using workload::RampSecondsForCount;

// Arrival i at t_i = Lambda^-1(u_i), u_i the "operational time": u_0 = 0 and u_i = u_(i-1) +
// g_i with g_i = 1 (constant), Exp(1) (Poisson) or Gamma(burstiness, 1 / burstiness) (gamma),
// drawn from std::mt19937_64(seed). This time change turns a unit-rate process into one of
// intensity r(t) (an inhomogeneous Poisson process for kPoisson), so ramps keep the gap shape.
// Without a ramp, kPoisson and kGamma give exactly PoissonScheduleNs / GammaScheduleNs, and
// kConstant gives t_i = i / rate. Offsets in ns, each rounded on its own (no accumulation).
class ArrivalProcess {
 public:
  ArrivalProcess(ArrivalKind kind, double burstiness, const RateProfile& profile, uint64_t seed);
  int64_t NextNs();

 private:
  ArrivalKind kind_;
  double burstiness_;
  RateProfile profile_;
  std::mt19937_64 rng_;
  double u_ = 0;    // operational time of the next arrival
  double t_s_ = 0;  // no-ramp Poisson/gamma: the running sum in seconds, as PoissonScheduleNs
  uint64_t index_ = 0;
};

// The first `count` offsets of an ArrivalProcess.
std::vector<int64_t> ScheduleNs(ArrivalKind kind, double burstiness, const RateProfile& profile,
                                uint32_t count, uint64_t seed);

// Human-readable name, as recorded in BenchmarkRecord.arrival: "poisson", "gamma(burstiness=b)",
// "constant", each followed by " ramp linear 2->20/s over 30 s" when ramped.
std::string DescribeArrivals(ArrivalKind kind, double burstiness, const RateProfile& profile);

}  // namespace servesweep::loadgen
