#include "record/run_settings.h"

namespace servesweep::record {

RunSettings RunSettingsFor(schema::RunSpec::Reader spec, const std::string& base_url) {
  RunSettings out;
  out.load = workload::LoadSettingsFor(spec, base_url);
  const auto slo = spec.getSlo();
  out.slo.ttft_ms = slo.getTtftMs();
  out.slo.tpot_ms = slo.getTpotMs();
  out.slo.e2el_ms = slo.getE2elMs();
  return out;
}

}  // namespace servesweep::record
