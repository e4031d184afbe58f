#include "kernels/collective_bandwidth.h"

namespace servesweep::kernels {

const char* CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kSendRecv:
      return "send_recv";
  }
  return "?";
}

double BusBandwidthFactor(Collective collective, int ranks) {
  if (ranks <= 0) return 0;
  const double n = ranks;
  switch (collective) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1) / n;
    case Collective::kSendRecv:
      return 1.0;
  }
  return 0;
}

double AlgBandwidthGBps(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

double BusBandwidthGBps(Collective collective, int ranks, uint64_t bytes, double seconds) {
  return AlgBandwidthGBps(bytes, seconds) * BusBandwidthFactor(collective, ranks);
}

std::vector<uint64_t> SizeLadder(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor,
                                 uint64_t align_bytes) {
  std::vector<uint64_t> sizes;
  if (factor < 2 || align_bytes == 0 || min_bytes > max_bytes) return sizes;
  for (uint64_t size = min_bytes; size <= max_bytes; size *= factor) {
    const uint64_t aligned = size / align_bytes * align_bytes;
    if (aligned > 0 && (sizes.empty() || sizes.back() != aligned)) sizes.push_back(aligned);
    if (size > max_bytes / factor) break;  // the next step would overflow or pass max
  }
  return sizes;
}

}  // namespace servesweep::kernels
