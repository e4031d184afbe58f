// Bandwidth arithmetic of collective probes, with nccl-tests' definitions, so our figures can be
// read beside theirs: algbw = bytes / time; busbw = algbw x a factor that makes collectives
// comparable with the hardware's link bandwidth (all-reduce 2(n-1)/n; all-gather,
// reduce-scatter and all-to-all (n-1)/n; send/recv 1). `bytes` is nccl-tests' "size": the
// whole buffer of the operation (for all-gather the gathered output, for reduce-scatter the
// input).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace servesweep::kernels {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };

const char* CollectiveName(Collective collective);

double BusBandwidthFactor(Collective collective, int ranks);

// GB/s (1e9 bytes per second), as nccl-tests prints.
double AlgBandwidthGBps(uint64_t bytes, double seconds);
double BusBandwidthGBps(Collective collective, int ranks, uint64_t bytes, double seconds);

// nccl-tests' -b MIN -e MAX -f FACTOR: MIN, MIN*FACTOR, ... up to MAX inclusive, each rounded
// down to a multiple of `align_bytes` (element size x ranks, so every rank gets whole elements).
std::vector<uint64_t> SizeLadder(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor,
                                 uint64_t align_bytes);

}  // namespace servesweep::kernels
