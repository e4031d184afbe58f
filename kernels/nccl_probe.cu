// servesweep-nccl-probe: NCCL collectives over a size ladder with nccl-tests' algbw/busbw.
// Two ways to run it:
//   mpirun -np N servesweep-nccl-probe       (or srun --mpi=pmix): one GPU per rank, across
//                                            nodes; the ncclUniqueId travels by MPI_Bcast.
//   servesweep-nccl-probe-local              (built without MPI) or servesweep-nccl-probe as a
//                                            single process: every visible GPU of this node
//                                            (ncclCommInitAll); with one GPU, a sanity check.
// Each collective's result is checked (rank-dependent fills, sampled) before it is timed.
// Output (rank 0, stdout), one JSON object per line:
//   {"probe":"nccl.all_reduce","ranks":8,"bytes":B,"time_us":T,"algbw_gbps":A,"busbw_gbps":U,"ok":true}
// Exit status: 0 all correct, 1 a wrong result or NCCL/CUDA error, 2 no GPU.
#include <cuda_runtime.h>
#include <nccl.h>
#if SERVESWEEP_NCCL_WITH_MPI
#include <mpi.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/collective_bandwidth.h"

namespace {

using servesweep::kernels::Collective;

constexpr uint64_t kMinBytes = 1u << 10;
constexpr uint64_t kMaxBytes = 1u << 30;
constexpr int kWarmup = 5;
constexpr int kIterations = 20;

// A failure ends every rank (MPI_Abort), so no other rank waits forever inside a collective.
[[noreturn]] void Fail(const char* call, const char* error) {
  std::fprintf(stderr, "servesweep-nccl-probe: %s: %s\n", call, error);
#if SERVESWEEP_NCCL_WITH_MPI
  MPI_Abort(MPI_COMM_WORLD, 1);
#endif
  std::exit(1);
}
#define CHECK_CUDA(call)                                      \
  do {                                                        \
    cudaError_t rc_ = (call);                                 \
    if (rc_ != cudaSuccess) Fail(#call, cudaGetErrorString(rc_)); \
  } while (0)
#define CHECK_NCCL(call)                                      \
  do {                                                        \
    ncclResult_t rc_ = (call);                                \
    if (rc_ != ncclSuccess) Fail(#call, ncclGetErrorString(rc_)); \
  } while (0)

// One communicator of this process: its rank, GPU, stream and buffers.
struct Member {
  int rank = 0;
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* receive = nullptr;
};

__global__ void Fill(float* data, size_t count, float value) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x) {
    data[i] = value;
  }
}

// Element counts of the send and receive buffers for `bytes` (nccl-tests' size convention).
void Counts(Collective c, uint64_t bytes, int ranks, size_t* send_count, size_t* receive_count) {
  const size_t total = bytes / sizeof(float);
  switch (c) {
    case Collective::kAllGather: *send_count = total / ranks; *receive_count = total; break;
    case Collective::kReduceScatter: *send_count = total; *receive_count = total / ranks; break;
    default: *send_count = total; *receive_count = total; break;
  }
}

void Launch(Collective c, Member& m, int ranks, size_t send_count, size_t receive_count) {
  switch (c) {
    case Collective::kAllReduce:
      CHECK_NCCL(ncclAllReduce(m.send, m.receive, send_count, ncclFloat, ncclSum, m.comm, m.stream));
      break;
    case Collective::kAllGather:
      CHECK_NCCL(ncclAllGather(m.send, m.receive, send_count, ncclFloat, m.comm, m.stream));
      break;
    case Collective::kReduceScatter:
      CHECK_NCCL(ncclReduceScatter(m.send, m.receive, receive_count, ncclFloat, ncclSum, m.comm, m.stream));
      break;
    case Collective::kAllToAll: {
      const size_t chunk = send_count / ranks;
      for (int peer = 0; peer < ranks; ++peer) {
        CHECK_NCCL(ncclSend(m.send + peer * chunk, chunk, ncclFloat, peer, m.comm, m.stream));
        CHECK_NCCL(ncclRecv(m.receive + peer * chunk, chunk, ncclFloat, peer, m.comm, m.stream));
      }
      break;
    }
    case Collective::kSendRecv:
      CHECK_NCCL(ncclSend(m.send, send_count, ncclFloat, (m.rank + 1) % ranks, m.comm, m.stream));
      CHECK_NCCL(ncclRecv(m.receive, receive_count, ncclFloat, (m.rank + ranks - 1) % ranks, m.comm, m.stream));
      break;
  }
}

// What element i of rank r's receive buffer must hold, when rank q's send buffer holds q + 1.
float Expected(Collective c, int rank, int ranks, size_t i, size_t receive_count) {
  const float sum = ranks * (ranks + 1) / 2.0f;
  switch (c) {
    case Collective::kAllReduce:
    case Collective::kReduceScatter: return sum;
    case Collective::kAllGather:
    case Collective::kAllToAll: return static_cast<float>(i / (receive_count / ranks) + 1);
    case Collective::kSendRecv: return static_cast<float>((rank + ranks - 1) % ranks + 1);
  }
  return 0;
}

// The few MPI calls, as no-ops in a single-process build.
#if SERVESWEEP_NCCL_WITH_MPI
void Barrier() { MPI_Barrier(MPI_COMM_WORLD); }
int AllTrue(int mine) {
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}
#else
void Barrier() {}
int AllTrue(int mine) { return mine; }
#endif

}  // namespace

int main(int argc, char** argv) {
  int world_rank = 0, world_size = 1;
#if SERVESWEEP_NCCL_WITH_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
#else
  (void)argc;
  (void)argv;
#endif
  auto finalize = [] {
#if SERVESWEEP_NCCL_WITH_MPI
    MPI_Finalize();
#endif
  };
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    if (world_rank == 0) std::printf("{\"probe\":\"nccl\",\"status\":\"no_gpu\"}\n");
    finalize();
    return 2;
  }

  // Members of this process: one GPU per rank under MPI, every GPU in a single process.
  std::vector<Member> members;
  int ranks = 0;
  if (world_size > 1) {
#if SERVESWEEP_NCCL_WITH_MPI
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &local);
    int local_rank = 0;
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    ncclUniqueId id;
    if (world_rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    Member m;
    m.rank = world_rank;
    m.device = local_rank % devices;
    CHECK_CUDA(cudaSetDevice(m.device));
    CHECK_NCCL(ncclCommInitRank(&m.comm, world_size, id, world_rank));
    members.push_back(m);
    ranks = world_size;
#endif
  } else {
    std::vector<ncclComm_t> comms(devices);
    std::vector<int> list(devices);
    for (int d = 0; d < devices; ++d) list[d] = d;
    CHECK_NCCL(ncclCommInitAll(comms.data(), devices, list.data()));
    for (int d = 0; d < devices; ++d) members.push_back({d, d, comms[d]});
    ranks = devices;
  }
  for (auto& m : members) {
    CHECK_CUDA(cudaSetDevice(m.device));
    CHECK_CUDA(cudaStreamCreate(&m.stream));
    CHECK_CUDA(cudaMalloc(&m.send, kMaxBytes));
    CHECK_CUDA(cudaMalloc(&m.receive, kMaxBytes));
  }
  auto synchronize = [&] {
    for (auto& m : members) {
      CHECK_CUDA(cudaSetDevice(m.device));
      CHECK_CUDA(cudaStreamSynchronize(m.stream));
    }
  };
  auto run = [&](Collective c, size_t send_count, size_t receive_count) {
    CHECK_NCCL(ncclGroupStart());
    for (auto& m : members) {
      CHECK_CUDA(cudaSetDevice(m.device));
      Launch(c, m, ranks, send_count, receive_count);
    }
    CHECK_NCCL(ncclGroupEnd());
  };

  int failures = 0;
  const Collective collectives[] = {Collective::kAllReduce, Collective::kAllGather,
                                    Collective::kReduceScatter, Collective::kAllToAll,
                                    Collective::kSendRecv};
  const uint64_t align = sizeof(float) * static_cast<uint64_t>(ranks);
  for (Collective c : collectives) {
    for (uint64_t bytes : servesweep::kernels::SizeLadder(kMinBytes, kMaxBytes, 4, align)) {
      size_t send_count = 0, receive_count = 0;
      Counts(c, bytes, ranks, &send_count, &receive_count);
      // Check: rank q sends q + 1 everywhere; sample the receive buffers.
      for (auto& m : members) {
        CHECK_CUDA(cudaSetDevice(m.device));
        Fill<<<256, 256, 0, m.stream>>>(m.send, send_count, static_cast<float>(m.rank + 1));
        Fill<<<256, 256, 0, m.stream>>>(m.receive, receive_count, -1.0f);
      }
      run(c, send_count, receive_count);
      synchronize();
      bool correct = true;
      for (auto& m : members) {
        CHECK_CUDA(cudaSetDevice(m.device));
        for (size_t i : {size_t{0}, receive_count / 2, receive_count - 1}) {
          float got = 0;
          CHECK_CUDA(cudaMemcpy(&got, m.receive + i, sizeof(float), cudaMemcpyDeviceToHost));
          correct = correct && got == Expected(c, m.rank, ranks, i, receive_count);
        }
      }
      const int all_ok = AllTrue(correct ? 1 : 0);

      for (int i = 0; i < kWarmup; ++i) run(c, send_count, receive_count);
      synchronize();
      Barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kIterations; ++i) run(c, send_count, receive_count);
      synchronize();
      Barrier();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kIterations;
      failures += all_ok ? 0 : 1;
      if (world_rank == 0) {
        std::printf("{\"probe\":\"nccl.%s\",\"ranks\":%d,\"bytes\":%llu,\"time_us\":%.2f,"
                    "\"algbw_gbps\":%.3f,\"busbw_gbps\":%.3f,\"ok\":%s}\n",
                    servesweep::kernels::CollectiveName(c), ranks,
                    static_cast<unsigned long long>(bytes), seconds * 1e6,
                    servesweep::kernels::AlgBandwidthGBps(bytes, seconds),
                    servesweep::kernels::BusBandwidthGBps(c, ranks, bytes, seconds),
                    all_ok ? "true" : "false");
        std::fflush(stdout);
      }
    }
  }
  for (auto& m : members) {
    cudaSetDevice(m.device);
    cudaFree(m.send);
    cudaFree(m.receive);
    cudaStreamDestroy(m.stream);
    ncclCommDestroy(m.comm);
  }
  finalize();
  return failures == 0 ? 0 : 1;
}
