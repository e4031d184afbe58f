#include "kernels/probe_report.h"

#include <cstdarg>
#include <cstdio>
#include <vector>

#include "kernels/device_query.h"
#include "kernels/gpu_probes.h"
#include "kernels/probe_verdict.h"

namespace servesweep::kernels {
namespace {

void Append(std::string* out, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  *out += buffer;
}

// JSON string literal (the texts here are device names and our own messages).
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace

bool RunProbeReport(const ProbeReportSettings& settings, std::string* report) {
  report->clear();
  const DeviceQuery query = QueryDevices();
  bool healthy = query.status != "failed";
  std::vector<ProbeFigure> figures;
  std::vector<Verdict> verdicts;
  if (query.status == "ok" && !settings.devices_only) {
    GpuProbeSettings probe_settings;
    probe_settings.repeats = settings.repeats;
    for (const auto& d : query.devices) {
      for (auto& f : RunGpuProbes(d.index, probe_settings)) figures.push_back(std::move(f));
    }
    std::vector<Figure> measured;
    for (const auto& f : figures) {
      if (f.status == "ok") measured.push_back({f.probe, f.gpu, f.value});
      healthy = healthy && f.status != "failed";
    }
    verdicts = Judge(query.devices.front().name, measured);
    healthy = healthy && Healthy(verdicts);
  }

  if (settings.json) {
    Append(report, "{\"status\":%s,\"detail\":%s,\"runtime_version\":%d,\"driver_version\":%d,",
           Quote(query.status).c_str(), Quote(query.detail).c_str(), query.runtime_version,
           query.driver_version);
    *report += "\"devices\":[";
    for (size_t i = 0; i < query.devices.size(); ++i) {
      const auto& d = query.devices[i];
      Append(report,
             "%s{\"index\":%d,\"name\":%s,\"memory_bytes\":%zu,\"sm_count\":%d,\"sm\":\"%d%d\"}",
             i ? "," : "", d.index, Quote(d.name).c_str(), d.memory_bytes, d.sm_count,
             d.compute_capability_major, d.compute_capability_minor);
    }
    *report += "],\"figures\":[";
  } else {
    Append(report, "cuda runtime %d, driver %d: %s%s%s%s\n", query.runtime_version,
           query.driver_version, query.status.c_str(), query.detail.empty() ? "" : " (",
           query.detail.c_str(), query.detail.empty() ? "" : ")");
    for (const auto& d : query.devices) {
      Append(report, "  gpu %d: %s sm_%d%d %d SMs %.1f GiB\n", d.index, d.name.c_str(),
             d.compute_capability_major, d.compute_capability_minor, d.sm_count,
             static_cast<double>(d.memory_bytes) / (1u << 30));
    }
    if (!figures.empty()) {
      Append(report, "%-10s %3s %10s %-8s %-8s %9s %-10s %s\n", "probe", "gpu", "value", "unit",
             "status", "expected", "verdict", "detail");
    }
  }
  size_t v = 0;
  for (size_t i = 0; i < figures.size(); ++i) {
    const auto& f = figures[i];
    const Verdict* verdict = f.status == "ok" ? &verdicts[v++] : nullptr;
    const char* health = verdict ? HealthName(verdict->health) : "-";
    const double expected = verdict ? verdict->expected : 0.0;
    const std::string reason = verdict ? verdict->reason : "";
    if (settings.json) {
      Append(report, "%s{\"probe\":%s,\"gpu\":%d,\"status\":%s,\"value\":%.3f,\"unit\":%s,",
             i ? "," : "", Quote(f.probe).c_str(), f.gpu, Quote(f.status).c_str(), f.value,
             Quote(f.unit).c_str());
      Append(report, "\"detail\":%s,\"expected\":%.3f,\"verdict\":%s,\"reason\":%s}",
             Quote(f.detail).c_str(), expected, Quote(health).c_str(), Quote(reason).c_str());
    } else {
      Append(report, "%-10s %3d %10.1f %-8s %-8s %9.1f %-10s %s%s%s\n", f.probe.c_str(), f.gpu,
             f.value, f.unit.c_str(), f.status.c_str(), expected, health, f.detail.c_str(),
             reason.empty() ? "" : " -- ", reason.c_str());
    }
  }
  if (settings.json) Append(report, "],\"healthy\":%s}\n", healthy ? "true" : "false");
  return healthy;
}

}  // namespace servesweep::kernels
