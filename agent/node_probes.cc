#include "agent/node_probes.h"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

#ifdef SERVESWEEP_HAVE_CUDA
#include "kernels/device_query.h"
#include "kernels/gpu_probes.h"
#endif

namespace servesweep::agent {
namespace {

// A probe that could not produce a figure (wrong result, CUDA error), reported with its reason.
struct FailedProbe {
  std::string probe;
  int gpu;
  std::string detail;
};

// Judges measured figures and writes them with their verdicts, then the failed probes, into the
// report; the node is healthy only when every figure is ok and no probe failed.
void Report(const std::string& gpu_name, const std::vector<kernels::Figure>& figures,
            const std::vector<std::pair<std::string, std::string>>& units_and_details,
            const std::vector<FailedProbe>& failed, schema::ProbeReport::Builder report) {
  const auto verdicts = kernels::Judge(gpu_name, figures);
  auto results = report.initResults(static_cast<unsigned>(verdicts.size() + failed.size()));
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const auto& v = verdicts[i];
    results[i].setName(v.figure.probe);
    results[i].setStatus("ok");
    results[i].setGpu(v.figure.gpu);
    results[i].setValue(v.figure.value);
    results[i].setUnit(units_and_details[i].first);
    results[i].setDetail(units_and_details[i].second);
    results[i].setExpected(v.expected);
    results[i].setVerdict(kernels::HealthName(v.health));
    results[i].setReason(v.reason);
  }
  for (size_t i = 0; i < failed.size(); ++i) {
    auto r = results[static_cast<unsigned>(verdicts.size() + i)];
    r.setName(failed[i].probe);
    r.setStatus("failed");
    r.setGpu(failed[i].gpu);
    r.setDetail(failed[i].detail);
    r.setVerdict("failed");
    r.setReason(failed[i].probe + " on GPU " + std::to_string(failed[i].gpu) +
                " failed: " + failed[i].detail);
  }
  report.setHealthy(kernels::Healthy(verdicts) && failed.empty());
}

}  // namespace

Status ParseEmulatedFigures(const std::string& text, std::vector<kernels::Figure>* out) {
  out->clear();
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    if (equals == std::string::npos) {
      return Status::InvalidArgument(
          fmt::format("emulated probe figures: expected probe[@gpu]=value, found '{}'", item));
    }
    kernels::Figure figure;
    figure.probe = item.substr(0, equals);
    const size_t at = figure.probe.find('@');
    char* end = nullptr;
    if (at != std::string::npos) {
      figure.gpu = static_cast<int>(std::strtol(figure.probe.c_str() + at + 1, &end, 10));
      figure.probe.resize(at);
    }
    const std::string value = item.substr(equals + 1);
    figure.value = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || figure.probe.empty()) {
      return Status::InvalidArgument(
          fmt::format("emulated probe figures: expected probe[@gpu]=number, found '{}'", item));
    }
    out->push_back(figure);
  }
  return Status::Ok();
}

void RunNodeProbes(const NodeProbeSettings& settings, schema::ProbeReport::Builder report) {
  if (settings.emulated_gpus > 0) {
    report.setGpuModel(settings.emulated_gpu_name);
    report.setStatus("emulated");
    std::vector<std::pair<std::string, std::string>> units(settings.emulated_figures.size(),
                                                           {"", "emulated figure"});
    Report(settings.emulated_gpu_name, settings.emulated_figures, units, {}, report);
    return;
  }
#ifdef SERVESWEEP_HAVE_CUDA
  const kernels::DeviceQuery query = kernels::QueryDevices();
  report.setStatus(query.status);
  if (query.status != "ok") {
    report.setGpuModel("none");
    report.setHealthy(query.status == "no_gpu");
    return;
  }
  report.setGpuModel(query.devices.front().name);
  kernels::GpuProbeSettings probe_settings;
  probe_settings.repeats = static_cast<int>(settings.repeats);
  std::vector<kernels::Figure> figures;
  std::vector<std::pair<std::string, std::string>> units;
  std::vector<FailedProbe> failed;
  for (const auto& device : query.devices) {
    for (const auto& f : kernels::RunGpuProbes(device.index, probe_settings)) {
      if (f.status == "ok") {
        figures.push_back({f.probe, f.gpu, f.value});
        units.emplace_back(f.unit, f.detail);
      } else if (f.status == "failed") {
        failed.push_back({f.probe, f.gpu, f.detail});
      }
    }
  }
  // Judged against the first GPU's model: nodes mix GPU models rarely, and then peers still tell.
  Report(query.devices.front().name, figures, units, failed, report);
#else
  report.setStatus("no_gpu");
  report.setGpuModel("none");
  report.setHealthy(true);
#endif
}

}  // namespace servesweep::agent
