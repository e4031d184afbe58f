#include "loadgen/client_load.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace servesweep::loadgen {

void DelayHistogram::Add(int64_t delay_ns) {
  int bucket = 0;
  if (delay_ns >= 100) {
    const double decades = std::log10(static_cast<double>(delay_ns) / 100.0);
    bucket = 1 + static_cast<int>(decades * kBucketsPerDecade);
  }
  ++buckets_[std::min(bucket, kBuckets - 1)];
  ++count_;
}

void DelayHistogram::Merge(const DelayHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
}

double DelayHistogram::PercentileMs(double p) const {
  if (count_ == 0) return std::numeric_limits<double>::quiet_NaN();
  const auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= std::max<uint64_t>(rank, 1)) {
      // Bucket i > 0 holds [100 ns x 10^((i-1)/20), 100 ns x 10^(i/20)).
      return i == 0 ? 1e-4 : 1e-4 * std::pow(10.0, static_cast<double>(i) / kBucketsPerDecade);
    }
  }
  return std::numeric_limits<double>::infinity();
}

std::string ClientBoundReasons(const ClientLoadFigures& f, const ClientBoundThresholds& limits) {
  std::string out;
  auto add = [&](const std::string& reason) { out += (out.empty() ? "" : "; ") + reason; };
  if (f.busiest_thread_cpu_fraction >= limits.busy_fraction &&
      f.phase_s >= limits.min_busy_phase_s) {
    add(fmt::format("the busiest load thread was {:.0f}% busy (limit {:.0f}%)",
                    100 * f.busiest_thread_cpu_fraction, 100 * limits.busy_fraction));
  }
  const bool has_itl = f.itl_median_ms > 0;  // false for NaN too
  const double read_lag_limit_ms =
      has_itl ? std::max(limits.read_lag_floor_ms, f.itl_median_ms) : limits.read_lag_no_itl_ms;
  if (f.read_lag_p99_ms >= read_lag_limit_ms) {
    add(fmt::format(
        "reads waited {:.1f} ms at p99 between arriving and being parsed (limit {:.1f} ms{})",
        f.read_lag_p99_ms, read_lag_limit_ms,
        has_itl && f.itl_median_ms >= limits.read_lag_floor_ms ? ", the median ITL: chunks merged"
                                                               : ""));
  }
  if (f.send_lateness_p99_ms >= limits.send_lateness_p99_ms) {
    add(fmt::format("sends were {:.1f} ms late at p99 (limit {:g} ms)", f.send_lateness_p99_ms,
                    limits.send_lateness_p99_ms));
  }
  if (out.empty()) return out;
  // The advice follows the figures: a busy load thread wants more threads; late reads or sends
  // while every thread was mostly idle mean the machine (other processes, the engine on the same
  // cores) kept the threads from running, which more threads would not fix.
  const bool threads_busy = f.busiest_thread_cpu_fraction >= limits.busy_fraction;
  const bool threads_idle = f.busiest_thread_cpu_fraction < limits.busy_fraction / 2;
  if (threads_busy) {
    out += fmt::format(
        ": the figures may be the client's; run with more load threads (client_threads, now {})",
        f.threads);
  } else if (threads_idle) {
    out += fmt::format(
        ": the figures may be the client's; the load threads were not busy (the busiest {:.0f}%), "
        "so the machine was: run the client on a less busy machine or on cores of its own",
        100 * f.busiest_thread_cpu_fraction);
  } else {
    out += fmt::format(
        ": the figures may be the client's; run with more load threads (client_threads, now {}) "
        "or on a less busy client machine",
        f.threads);
  }
  return out;
}

}  // namespace servesweep::loadgen
