#include "agent/inventory.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <sstream>
#include <thread>

#include "engines/engine_adapter.h"

namespace servesweep::agent {
namespace {

std::string Trim(std::string s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  const size_t end = s.find_last_not_of(" \t\r\n");
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

}  // namespace

std::vector<GpuInfo> ParseNvidiaSmiCsv(const std::string& csv) {
  std::vector<GpuInfo> gpus;
  std::istringstream lines(csv);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) fields.push_back(Trim(cell));
    if (fields.size() < 4) continue;
    GpuInfo gpu;
    try {
      gpu.index = static_cast<uint32_t>(std::stoul(fields[0]));
      gpu.memory_bytes = std::stoull(fields[2]) << 20;  // MiB
    } catch (const std::exception&) {
      continue;
    }
    gpu.name = fields[1];
    gpu.uuid = fields[3];
    gpus.push_back(gpu);
  }
  return gpus;
}

std::vector<GpuInfo> DetectGpus() {
  FILE* pipe = ::popen(
      "nvidia-smi --query-gpu=index,name,memory.total,uuid --format=csv,noheader,nounits "
      "2>/dev/null",
      "r");
  if (pipe == nullptr) return {};
  std::string output;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    output.append(buffer.data(), n);
  if (::pclose(pipe) != 0) return {};
  return ParseNvidiaSmiCsv(output);
}

std::string LocalHostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

void FillInventory(const InventorySettings& settings, schema::Inventory::Builder inventory) {
  inventory.setAgentId(settings.agent_id);
  inventory.setHostname(LocalHostname());
  inventory.setAddress(settings.address);
  inventory.setPid(static_cast<uint32_t>(::getpid()));
  inventory.setCpuCores(std::thread::hardware_concurrency());
  inventory.setMemoryBytes(static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                           static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE)));
  inventory.setVersion(SERVESWEEP_VERSION);
  inventory.setPool(settings.pool);
  std::vector<GpuInfo> gpus;
  if (settings.emulated_gpus > 0) {
    for (uint32_t i = 0; i < settings.emulated_gpus; ++i) {
      gpus.push_back({i, "emulated", 0, "emulated-" + std::to_string(i)});
    }
    inventory.setEmulatedGpus(true);
    inventory.setInterconnect("emulated");
  } else {
    gpus = DetectGpus();
    inventory.setInterconnect(gpus.empty() ? "none" : "unknown");
  }
  auto list = inventory.initGpus(static_cast<unsigned>(gpus.size()));
  for (size_t i = 0; i < gpus.size(); ++i) {
    list[i].setIndex(gpus[i].index);
    list[i].setName(gpus[i].name);
    list[i].setMemoryBytes(gpus[i].memory_bytes);
    list[i].setUuid(gpus[i].uuid);
  }
  const auto engines = engines::AvailableEngines();
  auto engine_list = inventory.initEngines(static_cast<unsigned>(engines.size()));
  for (size_t i = 0; i < engines.size(); ++i) engine_list.set(i, engines[i]);
}

}  // namespace servesweep::agent
