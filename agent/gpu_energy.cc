#include "agent/gpu_energy.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/clock.h"
#include "common/subprocess.h"

namespace servesweep::agent {
namespace {

std::string Trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

}  // namespace

bool ParseEnergyCounters(const std::string& csv, record::EnergyCounterRead* read) {
  std::stringstream lines(csv);
  for (std::string line; std::getline(lines, line);) {
    if (Trim(line).empty()) continue;
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(Trim(cell));
    const bool index_ok = cells.size() == 3 && !cells[0].empty() &&
                          cells[0].find_first_not_of("0123456789") == std::string::npos;
    if (!index_ok) {
      read->why_none = fmt::format("nvidia-smi printed '{}', expected 'index, uuid, mJ'", line);
      read->gpus.clear();
      return false;
    }
    record::EnergyCounterRead::Gpu gpu;
    gpu.index = static_cast<uint32_t>(std::stoul(cells[0]));
    gpu.uuid = cells[1];
    char* end = nullptr;
    const double mj = std::strtod(cells[2].c_str(), &end);
    gpu.energy_mj = end != cells[2].c_str() && *end == '\0' && std::isfinite(mj)
                        ? mj
                        : std::numeric_limits<double>::quiet_NaN();
    read->gpus.push_back(gpu);
  }
  return true;
}

record::EnergyCounterRead ReadEnergyCounters(const std::string& log_path) {
  record::EnergyCounterRead read;
  read.started_ns = SteadyNowNs();
  const std::vector<std::string> argv = {"nvidia-smi", fmt::format("--query-gpu={}", kEnergyQuery),
                                         "--format=csv,noheader,nounits"};
  ChildProcess process;
  std::error_code ec;
  std::filesystem::remove(log_path, ec);
  if (!ChildProcess::Spawn({argv, {}, log_path, ""}, &process).ok()) {
    read.finished_ns = SteadyNowNs();
    read.why_none = "nvidia-smi did not start";
    return read;
  }
  const auto status = process.Wait(std::chrono::seconds(10));
  read.finished_ns = SteadyNowNs();
  std::ifstream in(log_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!status) {
    process.Stop(std::chrono::seconds(1));
    read.why_none = "nvidia-smi's energy query took more than 10 s";
  } else if (*status != 0) {
    // One line: the reason lands in CSV cells and report tables.
    const std::string output = Trim(text.str());
    read.why_none = fmt::format("nvidia-smi --query-gpu={} ended with {}: {}", kEnergyQuery,
                                DescribeExit(*status),
                                Trim(output.substr(0, output.find('\n'))).substr(0, 200));
  } else {
    ParseEnergyCounters(text.str(), &read);
  }
  return read;
}

void RunGpusOnNode(const engines::LaunchContext& context, const std::string& visible_devices,
                   record::EnergyInputs* inputs) {
  const auto spec = context.spec;
  const uint32_t total = std::max<uint32_t>(1, spec.getGpusNeeded());
  const uint32_t here = std::min(total, engines::GpusPerNode(context));
  std::vector<std::string> names;
  std::stringstream entries(visible_devices);
  for (std::string entry; std::getline(entries, entry, ',');) {
    if (!Trim(entry).empty()) names.push_back(Trim(entry));
  }
  inputs->gpus.clear();
  for (uint32_t k = 0; k < here; ++k) {
    inputs->gpus.push_back(k < names.size() ? names[k] : std::to_string(k));
  }
  inputs->gpus_on_other_nodes = context.group_size > 1 ? total - here : 0;
  inputs->prefill.clear();
  const auto layout = spec.getLayout();
  const uint32_t instances = layout.getPrefillInstances() + layout.getDecodeInstances();
  if (layout.getPrefillInstances() == 0 || layout.getDecodeInstances() == 0) return;
  inputs->prefill.assign(here, false);
  for (const auto& instance :
       engines::PdInstances(context, std::max<uint32_t>(1, total / instances))) {
    if (instance.rank != context.rank) continue;
    for (uint32_t g = instance.first_gpu; g < instance.first_gpu + instance.gpus && g < here; ++g) {
      inputs->prefill[g] = instance.prefill;
    }
  }
}

}  // namespace servesweep::agent
