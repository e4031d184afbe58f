// servesweep-mpi-probe: the CPU network probe between nodes, launched by mpirun or
// `srun --mpi=pmix`. Rank 0 ping-pongs with every other rank over a size ladder: latency (half
// the round trip) and bandwidth per size, with every echoed buffer checked against what was sent
// (random bytes). Needs no GPU, so CI exercises the multi-rank path with `mpirun -np 2`.
//
// Output (rank 0, stdout): one JSON object per line:
//   {"probe":"mpi.pingpong","from":"host-a","to":"host-b","peer":1,"bytes":B,
//    "latency_us":L,"bandwidth_gbps":G,"iterations":N,"ok":true}
// Exit status: 0 when every exchange was correct, 1 otherwise, 2 on bad usage.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/collective_bandwidth.h"

namespace {

constexpr uint64_t kMinBytes = 8;
constexpr uint64_t kMaxBytes = 8u << 20;
constexpr int kWarmupIterations = 5;

// Fewer round trips for large messages keeps the probe under a few seconds per peer.
int IterationsFor(uint64_t bytes) {
  return bytes <= (64u << 10) ? 200 : bytes <= (1u << 20) ? 50 : 10;
}

std::string ProcessorName() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  return std::string(name, static_cast<size_t>(length));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) {
    if (rank == 0)
      std::fprintf(stderr, "servesweep-mpi-probe: expected at least 2 ranks, found %d\n", ranks);
    MPI_Finalize();
    return 2;
  }
  // Every rank's host name, for the output.
  std::vector<char> names(static_cast<size_t>(ranks) * MPI_MAX_PROCESSOR_NAME, '\0');
  std::string mine = ProcessorName();
  mine.resize(MPI_MAX_PROCESSOR_NAME, '\0');
  MPI_Gather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME,
             MPI_CHAR, 0, MPI_COMM_WORLD);

  std::vector<unsigned char> send(kMaxBytes), receive(kMaxBytes);
  std::mt19937_64 random(12345);
  for (auto& byte : send) byte = static_cast<unsigned char>(random());
  int failures = 0;

  for (int peer = 1; peer < ranks; ++peer) {
    for (uint64_t bytes : servesweep::kernels::SizeLadder(kMinBytes, kMaxBytes, 4, 1)) {
      const int count = static_cast<int>(bytes);
      const int iterations = IterationsFor(bytes);
      double seconds = 0;
      bool correct = true;
      for (int i = -kWarmupIterations; i < iterations; ++i) {
        if (rank == 0) {
          std::memset(receive.data(), 0, bytes);
          const auto start = std::chrono::steady_clock::now();
          MPI_Send(send.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
          MPI_Recv(receive.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          const auto end = std::chrono::steady_clock::now();
          if (i >= 0) seconds += std::chrono::duration<double>(end - start).count();
          correct = correct && std::memcmp(send.data(), receive.data(), bytes) == 0;
        } else if (rank == peer) {
          MPI_Recv(receive.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(receive.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
      }
      if (rank == 0) {
        const double one_way_s = seconds / iterations / 2;
        failures += correct ? 0 : 1;
        std::printf(
            "{\"probe\":\"mpi.pingpong\",\"from\":\"%s\",\"to\":\"%s\",\"peer\":%d,"
            "\"bytes\":%llu,\"latency_us\":%.3f,\"bandwidth_gbps\":%.4f,"
            "\"iterations\":%d,\"ok\":%s}\n",
            names.data(), names.data() + static_cast<size_t>(peer) * MPI_MAX_PROCESSOR_NAME, peer,
            static_cast<unsigned long long>(bytes), one_way_s * 1e6,
            servesweep::kernels::AlgBandwidthGBps(bytes, one_way_s), iterations,
            correct ? "true" : "false");
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
