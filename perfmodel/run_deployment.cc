#include "perfmodel/run_deployment.h"

#include <fmt/format.h>

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

DeploymentConfig DeploymentFor(schema::RunSpec::Reader spec) {
  DeploymentConfig d;
  const auto layout = spec.getLayout();
  d.tp = static_cast<int>(layout.getTp());
  d.pp = static_cast<int>(layout.getPp());
  d.dp = static_cast<int>(layout.getDp());
  // vLLM's --enable-expert-parallel spreads the experts over the TP x DP GPUs.
  d.ep = layout.getExpertParallel() ? d.tp * d.dp : 1;
  d.prefill_instances = static_cast<int>(layout.getPrefillInstances());
  d.decode_instances = static_cast<int>(layout.getDecodeInstances());
  if (spec.getPrecision().size() > 0) d.precision = spec.getPrecision();
  if (spec.getKvCacheDtype().size() > 0) d.kv_dtype = spec.getKvCacheDtype();
  // The engine's own settings where the matrix gives them (0 / default = the model's default,
  // which is vLLM's).
  const auto engine = spec.getEngineConfig();
  if (engine.getMaxNumSeqs() > 0) d.max_num_seqs = static_cast<int>(engine.getMaxNumSeqs());
  if (engine.getMaxBatchedTokens() > 0) {
    d.max_num_batched_tokens = static_cast<int>(engine.getMaxBatchedTokens());
  }
  if (engine.getPrefixCaching() != schema::EngineConfig::Toggle::DEFAULT) {
    d.prefix_caching = engine.getPrefixCaching() == schema::EngineConfig::Toggle::ON;
  }
  if (engine.getSpecNumTokens() > 0) {
    d.spec_num_tok = static_cast<int>(engine.getSpecNumTokens());
    d.spec_mean_accepted_tok = spec.getSim().getSpecAcceptedTok();
  }
  return d;
}

}  // namespace servesweep::perfmodel
