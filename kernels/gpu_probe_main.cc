// servesweep-gpu-probe: `servesweep probe` without the rest of servesweep, for probes-only
// builds (-DSERVESWEEP_PROBES_ONLY=ON needs just the CUDA toolkit): the machine to probe may
// have nothing else installed.
//   servesweep-gpu-probe [--json] [--devices-only] [--repeats N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/probe_report.h"

int main(int argc, char** argv) {
  servesweep::kernels::ProbeReportSettings settings;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      settings.json = true;
    } else if (std::strcmp(argv[i], "--devices-only") == 0) {
      settings.devices_only = true;
    } else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      settings.repeats = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "servesweep-gpu-probe: expected --json, --devices-only or --repeats N, "
                   "found '%s'\n",
                   argv[i]);
      return 2;
    }
  }
  std::string report;
  const bool healthy = servesweep::kernels::RunProbeReport(settings, &report);
  std::fputs(report.c_str(), stdout);
  return healthy ? 0 : 1;
}
