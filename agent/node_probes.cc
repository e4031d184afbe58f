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

// Judges measured figures and writes them, with their verdicts, into the report.
void Report(const std::string& gpu_name, const std::vector<kernels::Figure>& figures,
            const std::vector<std::pair<std::string, std::string>>& units_and_details,
            schema::ProbeReport::Builder report) {
  const auto verdicts = kernels::Judge(gpu_name, figures);
  auto results = report.initResults(static_cast<unsigned>(verdicts.size()));
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
  report.setHealthy(kernels::Healthy(verdicts));
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
      return Status::Error(fmt::format("emulated probe figures: expected probe[@gpu]=value, found '{}'", item));
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
      return Status::Error(fmt::format("emulated probe figures: expected probe[@gpu]=number, found '{}'", item));
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
    Report(settings.emulated_gpu_name, settings.emulated_figures, units, report);
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
  bool all_ran = true;
  for (const auto& device : query.devices) {
    for (const auto& f : kernels::RunGpuProbes(device.index, probe_settings)) {
      if (f.status == "ok") {
        figures.push_back({f.probe, f.gpu, f.value});
        units.emplace_back(f.unit, f.detail);
      }
      all_ran = all_ran && f.status != "failed";
    }
  }
  Report(query.devices.front().name, figures, units, report);
  report.setHealthy(report.getHealthy() && all_ran);
#else
  report.setStatus("no_gpu");
  report.setGpuModel("none");
  report.setHealthy(true);
#endif
}

}  // namespace servesweep::agent
