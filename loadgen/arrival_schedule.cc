#include "loadgen/arrival_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/sampling.h"

namespace servesweep::loadgen {

double ExponentialGapS(uint64_t uniform_bits, double rate_per_s) {
  // u in (0, 1]: the top 53 bits plus one, so log(u) is finite. Done by hand because
  // std::exponential_distribution's output differs between standard libraries.
  double u = (static_cast<double>(uniform_bits >> 11) + 1.0) * 0x1.0p-53;
  return -std::log(u) / rate_per_s;
}

std::vector<int64_t> PoissonScheduleNs(uint32_t count, double rate_per_s, uint64_t seed) {
  std::vector<int64_t> out(count, 0);
  if (std::isinf(rate_per_s)) return out;
  std::mt19937_64 rng(seed);
  double t_s = 0;
  for (uint32_t i = 1; i < count; ++i) {
    t_s += ExponentialGapS(rng(), rate_per_s);
    out[i] = std::llround(t_s * 1e9);
  }
  return out;
}

namespace {

// Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 through Gamma(shape + 1) x U^(1/shape).
double StandardGamma(std::mt19937_64& rng, double shape) {
  if (shape < 1) return StandardGamma(rng, shape + 1) * std::pow(Uniform01(rng), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = StandardNormal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = Uniform01(rng);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace

std::vector<int64_t> GammaScheduleNs(uint32_t count, double rate_per_s, double burstiness,
                                     uint64_t seed) {
  if (burstiness == 1.0 || std::isinf(rate_per_s))
    return PoissonScheduleNs(count, rate_per_s, seed);
  std::vector<int64_t> out(count, 0);
  std::mt19937_64 rng(seed);
  const double scale_s = 1.0 / (rate_per_s * burstiness);
  double t_s = 0;
  for (uint32_t i = 1; i < count; ++i) {
    t_s += StandardGamma(rng, burstiness) * scale_s;
    out[i] = std::llround(t_s * 1e9);
  }
  return out;
}

namespace {

// Lambda over the ramp alone: tau in [0, T] seconds after the ramp starts.
double RampIntegral(const RateProfile& p, double tau_s) {
  const double r0 = p.start_rate_per_s, r1 = p.end_rate_per_s, T = p.ramp_s;
  if (p.ramp == RampKind::kLinear) return r0 * tau_s + (r1 - r0) * tau_s * tau_s / (2 * T);
  const double log_k = std::log(r1 / r0);
  if (std::abs(log_k) < 1e-12) return r0 * tau_s;
  return r0 * T / log_k * std::expm1(tau_s * log_k / T);
}

// Its inverse, for u in [0, RampIntegral(T)].
double RampInverse(const RateProfile& p, double u) {
  const double r0 = p.start_rate_per_s, r1 = p.end_rate_per_s, T = p.ramp_s;
  if (p.ramp == RampKind::kLinear) {
    // The root of a tau^2 + r0 tau - u = 0 (a = (r1 - r0) / 2T) written as 2u / (r0 + sqrt(...)),
    // which stays exact when a is 0 or tiny.
    const double a = (r1 - r0) / (2 * T);
    return 2 * u / (r0 + std::sqrt(std::max(0.0, r0 * r0 + 4 * a * u)));
  }
  const double log_k = std::log(r1 / r0);
  if (std::abs(log_k) < 1e-12) return u / r0;
  return T / log_k * std::log1p(u * log_k / (r0 * T));
}

}  // namespace

double RateAt(const RateProfile& p, double t_s) {
  if (p.ramp == RampKind::kNone) return p.rate_per_s;
  if (t_s < p.ramp_start_s) return p.start_rate_per_s;
  if (t_s >= p.ramp_start_s + p.ramp_s) return p.end_rate_per_s;
  const double x = (t_s - p.ramp_start_s) / p.ramp_s;
  if (p.ramp == RampKind::kLinear) {
    return p.start_rate_per_s + (p.end_rate_per_s - p.start_rate_per_s) * x;
  }
  return p.start_rate_per_s * std::pow(p.end_rate_per_s / p.start_rate_per_s, x);
}

double IntegratedRate(const RateProfile& p, double t_s) {
  if (p.ramp == RampKind::kNone) return p.rate_per_s * t_s;
  const double before = p.start_rate_per_s * std::min(t_s, p.ramp_start_s);
  if (t_s <= p.ramp_start_s) return before;
  const double tau_s = t_s - p.ramp_start_s;
  if (tau_s <= p.ramp_s) return before + RampIntegral(p, tau_s);
  return before + RampIntegral(p, p.ramp_s) + p.end_rate_per_s * (tau_s - p.ramp_s);
}

double InverseIntegratedRate(const RateProfile& p, double u) {
  if (p.ramp == RampKind::kNone) return u / p.rate_per_s;
  const double before = p.start_rate_per_s * p.ramp_start_s;
  if (u <= before) return u / p.start_rate_per_s;
  const double in_ramp = u - before;
  const double whole_ramp = RampIntegral(p, p.ramp_s);
  if (in_ramp <= whole_ramp) return p.ramp_start_s + RampInverse(p, in_ramp);
  return p.ramp_start_s + p.ramp_s + (in_ramp - whole_ramp) / p.end_rate_per_s;
}

ArrivalProcess::ArrivalProcess(ArrivalKind kind, double burstiness, const RateProfile& profile,
                               uint64_t seed)
    : kind_(kind == ArrivalKind::kGamma && burstiness == 1.0 ? ArrivalKind::kPoisson : kind),
      burstiness_(burstiness),
      profile_(profile),
      rng_(seed) {}

int64_t ArrivalProcess::NextNs() {
  const uint64_t i = index_++;
  if (i == 0) return 0;
  if (profile_.ramp == RampKind::kNone) {
    const double rate = profile_.rate_per_s;
    if (std::isinf(rate)) return 0;
    if (kind_ == ArrivalKind::kConstant) {
      return std::llround(static_cast<double>(i) * 1e9 / rate);
    }
    // The same draws and sums as PoissonScheduleNs / GammaScheduleNs.
    t_s_ += kind_ == ArrivalKind::kPoisson
                ? ExponentialGapS(rng_(), rate)
                : StandardGamma(rng_, burstiness_) * (1.0 / (rate * burstiness_));
    return std::llround(t_s_ * 1e9);
  }
  switch (kind_) {
    case ArrivalKind::kConstant:
      u_ = static_cast<double>(i);
      break;
    case ArrivalKind::kPoisson:
      u_ += ExponentialGapS(rng_(), 1.0);
      break;
    case ArrivalKind::kGamma:
      u_ += StandardGamma(rng_, burstiness_) / burstiness_;
      break;
  }
  return std::llround(InverseIntegratedRate(profile_, u_) * 1e9);
}

std::vector<int64_t> ScheduleNs(ArrivalKind kind, double burstiness, const RateProfile& profile,
                                uint32_t count, uint64_t seed) {
  ArrivalProcess process(kind, burstiness, profile, seed);
  std::vector<int64_t> out(count);
  for (auto& t : out) t = process.NextNs();
  return out;
}

std::string DescribeArrivals(ArrivalKind kind, double burstiness, const RateProfile& profile) {
  std::string out = kind == ArrivalKind::kConstant ? std::string("constant")
                    : kind == ArrivalKind::kGamma && burstiness != 1.0
                        ? fmt::format("gamma(burstiness={})", burstiness)
                        : std::string("poisson");
  if (profile.ramp != RampKind::kNone) {
    out += fmt::format(" ramp {} {}->{}/s over {:.6g} s",
                       profile.ramp == RampKind::kLinear ? "linear" : "exponential",
                       profile.start_rate_per_s, profile.end_rate_per_s, profile.ramp_s);
    if (profile.ramp_start_s > 0) out += fmt::format(" from {:.6g} s", profile.ramp_start_s);
  }
  return out;
}

}  // namespace servesweep::loadgen
