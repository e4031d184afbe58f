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
#include "engines/flag_table.h"

namespace servesweep::engines {

// An engine whose flags its flag tables spell (vLLM, SGLang, llama.cpp): Plan() finds the table
// of the run's engine_version and fills what every launch has (BeginLaunch: the URL, persona,
// version command, model file), then the engine's PlanWithTable spells its processes.
class FlagTableAdapter : public EngineAdapter {
 public:
  explicit FlagTableAdapter(const char* engine) : engine_(engine) {}
  Status Plan(const LaunchContext& context, EngineLaunch* launch) const final;

 protected:
  virtual Status PlanWithTable(const FlagTable& table, const LaunchContext& context,
                               EngineLaunch* launch) const = 0;

 private:
  const char* engine_;
};

class VllmAdapter : public FlagTableAdapter {
 public:
  VllmAdapter() : FlagTableAdapter("vllm") {}

 protected:
  Status PlanWithTable(const FlagTable& table, const LaunchContext& context,
                       EngineLaunch* launch) const override;
};

class SglangAdapter : public FlagTableAdapter {
 public:
  SglangAdapter() : FlagTableAdapter("sglang") {}

 protected:
  Status PlanWithTable(const FlagTable& table, const LaunchContext& context,
                       EngineLaunch* launch) const override;
};

class LlamacppAdapter : public FlagTableAdapter {
 public:
  LlamacppAdapter() : FlagTableAdapter("llamacpp") {}

 protected:
  Status PlanWithTable(const FlagTable& table, const LaunchContext& context,
                       EngineLaunch* launch) const override;
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
