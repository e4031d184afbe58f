#include "perfmodel/run_deployment.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "perfmodel/profiles.h"

namespace servesweep::perfmodel {

Status ResolveModelProfileName(schema::RunSpec::Reader spec, std::string* name) {
  if (spec.getSim().getModelProfile().size() > 0) {
    *name = spec.getSim().getModelProfile();
    return Status::Ok();
  }
  if (Status s = InferModelProfileName(spec.getModel(), name); !s.ok()) {
    return s.Prefixed("sim.model_profile");
  }
  return Status::Ok();
}

std::string ModelArchitectureOf(schema::RunSpec::Reader spec) {
  std::string name;
  ModelProfile model;
  if (!ResolveModelProfileName(spec, &name).ok() || !LoadModelProfile(name, &model).ok()) {
    return "";
  }
  return ModelArchitecture(model);
}

Status EngineProfileFor(schema::RunSpec::Reader spec, EngineProfile* out, std::string* why) {
  return SelectEngineProfile(spec.getEngine(), spec.getEngineVersion(), ModelArchitectureOf(spec),
                             out, why);
}

namespace {

// The value of `--flag N` or `--flag=N` in the run's engine flags; 0 when absent or not a number.
int FlagValue(schema::RunSpec::Reader spec, std::string_view flag) {
  const auto flags = spec.getEngineFlags();
  for (unsigned i = 0; i < flags.size(); ++i) {
    const std::string_view f(flags[i].cStr());
    std::string value;
    if (f == flag && i + 1 < flags.size()) {
      value = flags[i + 1].cStr();
    } else if (f.size() > flag.size() && f.substr(0, flag.size()) == flag &&
               f[flag.size()] == '=') {
      value = std::string(f.substr(flag.size() + 1));
    } else {
      continue;
    }
    try {
      return std::max(0, std::stoi(value));
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

DeploymentConfig DeploymentFor(schema::RunSpec::Reader spec, const EngineProfile& engine,
                               const HardwareProfile* hardware) {
  DeploymentConfig d;
  d.engine = engine;
  const EngineDefaults& defaults = engine.defaults;
  d.max_num_seqs = defaults.max_num_seqs;
  d.max_num_batched_tokens = defaults.max_num_batched_tokens;
  d.chunked_prefill = defaults.chunked_prefill;
  d.mixed_batches = defaults.mixed_batches;
  d.gpu_memory_utilization = defaults.gpu_memory_utilization;
  d.activation_reserve_bytes = defaults.activation_reserve_gb * 1e9;
  d.decode_steps = defaults.decode_steps;
  d.sliding_kv_ratio = defaults.sliding_kv_ratio;
  d.prefill_chunk_tok = defaults.prefill_chunk_tok;
  if (hardware != nullptr && defaults.large_gpu_memory_gb > 0 &&
      hardware->memory_bytes >= defaults.large_gpu_memory_gb * 1e9 &&
      std::find(defaults.large_gpu_except.begin(), defaults.large_gpu_except.end(),
                hardware->name) == defaults.large_gpu_except.end()) {
    if (defaults.large_gpu_max_num_seqs > 0) d.max_num_seqs = defaults.large_gpu_max_num_seqs;
    if (defaults.large_gpu_max_num_batched_tokens > 0) {
      d.max_num_batched_tokens = defaults.large_gpu_max_num_batched_tokens;
    }
  }

  const auto layout = spec.getLayout();
  d.tp = static_cast<int>(layout.getTp());
  d.pp = static_cast<int>(layout.getPp());
  d.dp = static_cast<int>(layout.getDp());
  if (layout.getDpAttention()) {
    // SGLang's DP attention: the dp groups split the instance's own tp GPUs (feasibility.cc
    // counts tp x pp GPUs for it), so one instance, not dp replicas.
    d.dp_attention = d.dp;
    d.dp = 1;
  }
  // vLLM's --enable-expert-parallel spreads the experts over the TP x DP GPUs (with DP attention:
  // the instance's tp GPUs).
  d.ep = layout.getExpertParallel() ? d.tp * d.dp : 1;
  d.prefill_instances = static_cast<int>(layout.getPrefillInstances());
  d.decode_instances = static_cast<int>(layout.getDecodeInstances());
  if (spec.getPrecision().size() > 0) d.precision = spec.getPrecision();
  if (spec.getKvCacheDtype().size() > 0) d.kv_dtype = spec.getKvCacheDtype();
  // The engine's own settings where the matrix gives them.
  const auto config = spec.getEngineConfig();
  if (config.getMaxNumSeqs() > 0) d.max_num_seqs = static_cast<int>(config.getMaxNumSeqs());
  if (config.getMaxBatchedTokens() > 0) {
    d.max_num_batched_tokens = static_cast<int>(config.getMaxBatchedTokens());
  }
  if (config.getChunkedPrefill() != schema::EngineConfig::Toggle::DEFAULT) {
    d.chunked_prefill = config.getChunkedPrefill() == schema::EngineConfig::Toggle::ON;
  }
  if (config.getChunkedPrefillTok() > 0) {
    d.prefill_chunk_tok = static_cast<int>(config.getChunkedPrefillTok());
  }
  if (config.getGpuMemoryFraction() > 0) {
    d.gpu_memory_utilization = config.getGpuMemoryFraction();
  }
  if (config.getApiServerCount() > 0) d.api_servers = static_cast<int>(config.getApiServerCount());
  // llama.cpp's -c: the KV cache holds this many tokens over all slots.
  if (config.getContextLenTok() > 0 && std::string_view(spec.getEngine().cStr()) == "llamacpp") {
    d.kv_capacity_limit_tok = config.getContextLenTok();
  }
  if (config.getPrefixCaching() != schema::EngineConfig::Toggle::DEFAULT) {
    d.prefix_caching = config.getPrefixCaching() == schema::EngineConfig::Toggle::ON;
  }
  if (config.getSpecNumTokens() > 0) {
    d.spec_num_tok = static_cast<int>(config.getSpecNumTokens());
    d.spec_mean_accepted_tok = spec.getSim().getSpecAcceptedTok();
  }
  if (const int steps = FlagValue(spec, "--num-scheduler-steps"); steps > 0) {
    d.decode_steps = steps;
  }
  if (config.getLoraAdapters().size() > 0) {
    // The engines' defaults where the matrix leaves them: vLLM --max-lora-rank 16 and
    // --max-loras 1; SGLang --max-loras-per-batch 8; the emulator keeps every adapter loaded.
    const std::string_view engine_name = spec.getEngine().cStr();
    d.lora_rank = config.getMaxLoraRank() > 0 ? static_cast<int>(config.getMaxLoraRank()) : 16;
    d.max_loras = config.getMaxLoras() > 0  ? static_cast<int>(config.getMaxLoras())
                  : engine_name == "sglang" ? 8
                  : engine_name == "sim"    ? static_cast<int>(config.getLoraAdapters().size())
                                            : 1;
  }
  return d;
}

DeploymentConfig DeploymentFor(schema::RunSpec::Reader spec) {
  return DeploymentFor(spec, EngineProfile{});
}

}  // namespace servesweep::perfmodel
