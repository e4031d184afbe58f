#include "kernels/device_query.h"

#include <cuda_runtime.h>

#include <string>

namespace servesweep::kernels {
namespace {

__global__ void FillIndex(unsigned* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * 2654435761u;
}

}  // namespace

DeviceQuery QueryDevices() {
  DeviceQuery query;
  cudaRuntimeGetVersion(&query.runtime_version);
  cudaDriverGetVersion(&query.driver_version);
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver || (rc == cudaSuccess && count == 0)) {
    query.status = "no_gpu";
    query.detail = rc == cudaSuccess ? "no CUDA device" : cudaGetErrorString(rc);
    return query;
  }
  if (rc != cudaSuccess) {
    query.status = "failed";
    query.detail = cudaGetErrorString(rc);
    return query;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.memory_bytes = prop.totalGlobalMem;
    info.sm_count = prop.multiProcessorCount;
    info.compute_capability_major = prop.major;
    info.compute_capability_minor = prop.minor;
    query.devices.push_back(info);
  }
  query.status = "ok";
  return query;
}

std::string SmokeTestKernel() {
  constexpr unsigned kCount = 1u << 20;
  unsigned* device = nullptr;
  if (cudaMalloc(&device, kCount * sizeof(unsigned)) != cudaSuccess) return "cudaMalloc failed";
  FillIndex<<<(kCount + 255) / 256, 256>>>(device, kCount);
  std::string status = "ok";
  if (cudaDeviceSynchronize() != cudaSuccess) status = "kernel failed";
  unsigned sample[4] = {};
  const unsigned probe_index[4] = {0, 1, kCount / 2, kCount - 1};
  for (int k = 0; k < 4 && status == "ok"; ++k) {
    cudaMemcpy(&sample[k], device + probe_index[k], sizeof(unsigned), cudaMemcpyDeviceToHost);
    if (sample[k] != probe_index[k] * 2654435761u) status = "wrong result from kernel";
  }
  cudaFree(device);
  return status;
}

}  // namespace servesweep::kernels
