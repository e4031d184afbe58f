// The adapters of engines servesweep starts (besides the emulator, sim_adapter.h):
//  - VllmAdapter, SglangAdapter: one node or many (head + workers, start order: the head's
//    process first, workers join its rendezvous), aggregated or prefill/decode disaggregated
//    behind the engine's router; flags spelled by the flag table of the run's engine_version.
//  - LlamacppAdapter: llama-server on one node (slots = engine_config.max_num_seqs).
//  - TemplateAdapter: an engine servesweep does not know, from an argv with {placeholders}.
//  - ExternalAdapter: a managed OpenAI-compatible endpoint; nothing is started.
//
// Thread-safety: stateless.
#pragma once

#include "engines/engine_adapter.h"

namespace servesweep::engines {

class VllmAdapter : public EngineAdapter {
 public:
  Status Plan(const LaunchContext& context, EngineLaunch* launch) const override;
};

class SglangAdapter : public EngineAdapter {
 public:
  Status Plan(const LaunchContext& context, EngineLaunch* launch) const override;
};

class LlamacppAdapter : public EngineAdapter {
 public:
  Status Plan(const LaunchContext& context, EngineLaunch* launch) const override;
};

class TemplateAdapter : public EngineAdapter {
 public:
  Status Plan(const LaunchContext& context, EngineLaunch* launch) const override;
};

class ExternalAdapter : public EngineAdapter {
 public:
  Status Plan(const LaunchContext& context, EngineLaunch* launch) const override;
};

}  // namespace servesweep::engines
