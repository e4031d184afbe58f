#include "kernels/device_query.h"

#include <cuda_runtime.h>

#include <string>

namespace servesweep::kernels {

DeviceQuery QueryDevices() {
  DeviceQuery query;
  cudaRuntimeGetVersion(&query.runtime_version);
  cudaDriverGetVersion(&query.driver_version);
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  // No driver at all (driver version 0) means no GPU here; a driver too old for this runtime on
  // a GPU node is a failure to report, not a healthy node without GPUs.
  const bool no_driver = rc == cudaErrorInsufficientDriver && query.driver_version == 0;
  if (rc == cudaErrorNoDevice || no_driver || (rc == cudaSuccess && count == 0)) {
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


}  // namespace servesweep::kernels
