#include "matrix/engine_configuration.h"

#include "matrix/spec_digest.h"

namespace servesweep::matrix {

std::string EngineConfigurationOf(schema::RunSpec::Reader spec) {
  return "cfg-" + SpecDigestWithout(spec, [](schema::RunSpec::Builder copy) {
           // The run's own keys: identity, load, verdict settings, the lifecycle itself.
           copy.setRunId("");
           copy.setSweepName("");
           copy.setIndex(0);
           copy.setRepeat(0);
           copy.disownWorkload();
           copy.disownSlo();
           copy.setTimeoutS(0);
           copy.setMaxAttempts(0);
           copy.setLabel("");
           copy.setBaseline(false);
           copy.setCompareGroup("");
           copy.disownQuality();
           copy.setMinSuccessRate(0);
           copy.setEngineLifecycle(schema::EngineLifecycle::PER_CONFIGURATION);
           copy.setEngineConfiguration("");
         });
}

}  // namespace servesweep::matrix
