#include "matrix/engine_configuration.h"

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/ids.h"

namespace servesweep::matrix {

std::string EngineConfigurationOf(schema::RunSpec::Reader spec) {
  capnp::MallocMessageBuilder scratch;
  scratch.setRoot(spec);
  auto copy = scratch.getRoot<schema::RunSpec>();
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
  // Canonical bytes: the same keys give the same digest whatever the builder's layout.
  capnp::MallocMessageBuilder canonical;
  canonical.setRoot(copy.asReader());
  const auto words = capnp::messageToFlatArray(canonical);
  const auto bytes = words.asChars();
  return "cfg-" + StableHashHex(std::string_view(bytes.begin(), bytes.size())).substr(0, 12);
}

}  // namespace servesweep::matrix
