// The first hardware probe: which CUDA devices this node has, as the CUDA runtime sees them.
// It reports "no_gpu" cleanly when there is no device or no driver, so it is safe everywhere.
// kernels/ is a leaf: it knows nothing of sweeps; the agent and `servesweep probe` call it.
//
// Thread-safety: safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace servesweep::kernels {

struct DeviceInfo {
  int index = 0;
  std::string name;
  size_t memory_bytes = 0;
  int sm_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};

struct DeviceQuery {
  std::string status;  // "ok", "no_gpu", "failed"
  std::string detail;  // the CUDA error string when not ok
  int runtime_version = 0;
  int driver_version = 0;
  std::vector<DeviceInfo> devices;
};

DeviceQuery QueryDevices();

}  // namespace servesweep::kernels
