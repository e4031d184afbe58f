// The load generator's own saturation while it measured: a client that cannot keep up hides
// the engine's figures behind its own delays, so each run records how busy its load threads
// were and how late they read and sent (docs/metrics.md#client-bound). Measured per load loop
// and merged over the loops of a phase.
//
// Thread-safety: values; each load loop fills its own, merged after the threads joined.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace servesweep::loadgen {

// Delays from 100 ns to 100 s in 20 logarithmic buckets per decade (about 12% wide): a
// percentile is read to within a bucket without keeping one value per read.
class DelayHistogram {
 public:
  void Add(int64_t delay_ns);
  void Merge(const DelayHistogram& other);
  uint64_t count() const { return count_; }
  // The upper edge of the bucket holding the p-th percentile (p in [0, 100]), in ms; NaN when
  // empty.
  double PercentileMs(double p) const;

 private:
  static constexpr int kBucketsPerDecade = 20;
  static constexpr int kBuckets = 9 * kBucketsPerDecade + 2;  // + under 100 ns, over 100 s
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
};

struct ClientLoad {
  // CPU time / wall time of the busiest load thread over the measured phase (1 = never idle).
  double busiest_thread_cpu_fraction = 0;
  // The kernel's receive stamp of a read to the moment the load thread handed it to the parser.
  DelayHistogram read_lag;
  // A request's due time (its scheduled time, and a free slot) to its hand-over to libcurl.
  DelayHistogram send_lateness;
};

// What the verdict reads of one run.
struct ClientLoadFigures {
  double busiest_thread_cpu_fraction = 0;  // NaN when unmeasured (a virtual run)
  double phase_s = 0;                      // the measured phase's length
  double read_lag_p99_ms = 0;
  double send_lateness_p99_ms = 0;
  double itl_median_ms = 0;  // the run's median gap between chunks; NaN or 0 when none
  uint32_t threads = 1;      // load threads, for the advice
};

// The client-bound verdict (docs/metrics.md#client-bound): the figures of a run whose load
// threads were saturated may be the client's, not the engine's. Each threshold crossed is a
// reason: the busiest load thread's CPU fraction, the p99 lag from a read's kernel stamp to its
// parsing, the p99 lateness of sends. "" when none is crossed.
// A CPU fraction is judged only over a phase of at least min_busy_phase_s: over a few
// milliseconds it says nothing. Reads are stamped by the kernel, so a late read costs a figure
// only when a stream's next chunk arrived before it: the read lag's limit is the run's median
// ITL (then at least 1% of reads merged two chunks under the later one's time), never below
// read_lag_floor_ms (the scheduling noise of a busy machine), and read_lag_no_itl_ms for
// single-chunk outputs.
struct ClientBoundThresholds {
  double busy_fraction = 0.8;
  double min_busy_phase_s = 0.5;
  double read_lag_floor_ms = 2;
  double read_lag_no_itl_ms = 10;
  double send_lateness_p99_ms = 10;
};
std::string ClientBoundReasons(const ClientLoadFigures& figures,
                               const ClientBoundThresholds& limits = {});

}  // namespace servesweep::loadgen
