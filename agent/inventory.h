// The node inventory an agent announces in its hello: host, CPUs, memory, GPUs (real ones from
// nvidia-smi, or emulated ones for runs on the emulator), interconnect and engines it can start.
//
// Thread-safety: pure functions (DetectGpus runs a short child process).
#pragma once

#include <string>
#include <vector>

#include "schema/wire.capnp.h"

namespace servesweep::agent {

struct GpuInfo {
  uint32_t index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  std::string uuid;
};

struct InventorySettings {
  std::string agent_id;
  std::string address;         // how other agents reach this node
  uint32_t emulated_gpus = 0;  // > 0: announce this many emulated GPUs instead of real ones
  std::string pool;            // "prefill", "decode", or "" (any role)
};

// GPUs reported by nvidia-smi; empty when there is none (or no driver).
std::vector<GpuInfo> DetectGpus();
// Parses `nvidia-smi --query-gpu=index,name,memory.total,uuid --format=csv,noheader,nounits`.
std::vector<GpuInfo> ParseNvidiaSmiCsv(const std::string& csv);

void FillInventory(const InventorySettings& settings, schema::Inventory::Builder inventory);

std::string LocalHostname();

}  // namespace servesweep::agent
