#include "sim/fault_plan.h"

#include "common/sampling.h"

namespace servesweep::sim {
namespace {

enum Stream : uint64_t { kError = 1, kStall = 2, kBrokenEvent = 3, kTruncate = 4, kEmpty = 5 };

}  // namespace

double FaultDraw(uint64_t seed, uint64_t stream, uint64_t seq) {
  const uint64_t h = SplitMix64(SplitMix64(seed ^ (stream << 56)) ^ seq);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

RequestFaults PlanFaults(const FaultSettings& f, uint64_t seq) {
  RequestFaults out;
  if (f.error_rate > 0) out.error = FaultDraw(f.seed, kError, seq) < f.error_rate;
  if (f.stall_probability > 0 && f.stall_ms > 0) {
    out.stall = FaultDraw(f.seed, kStall, seq) < f.stall_probability;
  }
  if (f.broken_event_rate > 0) {
    out.broken_event = FaultDraw(f.seed, kBrokenEvent, seq) < f.broken_event_rate;
  }
  if (f.truncate_rate > 0) out.truncate = FaultDraw(f.seed, kTruncate, seq) < f.truncate_rate;
  if (f.empty_stream_rate > 0) {
    out.empty_stream = FaultDraw(f.seed, kEmpty, seq) < f.empty_stream_rate;
  }
  return out;
}

}  // namespace servesweep::sim
