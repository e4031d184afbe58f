// The emulator engine: `servesweep sim` started as a child process, exactly like a real engine,
// so every layer (spawn, readiness, load, scrape, teardown) is exercised without a GPU.
// Multi-node layouts: the head runs the emulator; workers hold their GPUs and start nothing.
//
// Thread-safety: stateless.
#pragma once

#include "engines/engine_adapter.h"

namespace servesweep::engines {

class SimAdapter : public EngineAdapter {
 public:
  Status Plan(const LaunchContext& context, EngineLaunch* launch) const override;
};

}  // namespace servesweep::engines
