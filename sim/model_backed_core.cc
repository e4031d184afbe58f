#include "sim/model_backed_core.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "perfmodel/profiles.h"
#include "sim/perf_model_core.h"

namespace servesweep::sim {

Status MakeModelBackedCore(const ModelBackedOptions& options, bool startup_given,
                           EmulatorSettings* settings, std::unique_ptr<EngineCore>* out) {
  perfmodel::HardwareProfile hardware;
  perfmodel::ModelProfile model;
  std::string model_name = options.model_profile;
  if (Status s = perfmodel::LoadHardwareProfile(options.hardware, &hardware); !s.ok()) return s;
  if (model_name.empty()) {
    if (Status s = perfmodel::InferModelProfileName(settings->model_name, &model_name); !s.ok()) {
      return s;
    }
  }
  if (Status s = perfmodel::LoadModelProfile(model_name, &model); !s.ok()) return s;
  perfmodel::DeploymentConfig deployment = options.deployment;
  if (Status s = perfmodel::LoadEngineProfile(options.engine_profile, &deployment.engine);
      !s.ok()) {
    return s;
  }
  if (options.expert_parallel) deployment.ep = deployment.tp * deployment.dp;
  // Served adapters cost what the model says (their matmuls, their slots, their loads) instead
  // of the fixed schedule's lora_load_ms.
  if (!settings->lora_adapters.empty()) {
    if (deployment.lora_rank == 0) deployment.lora_rank = 16;
    deployment.max_loras = settings->max_loras > 0
                               ? settings->max_loras
                               : static_cast<int>(settings->lora_adapters.size());
  } else {
    deployment.lora_rank = 0;
  }
  std::unique_ptr<PerfModelCore> core;
  if (Status s = PerfModelCore::Create(hardware, model, deployment, SteadyNowNs(), &core);
      !s.ok()) {
    return s;
  }
  settings->max_model_len = std::min(settings->max_model_len, core->KvCapacityTok());
  if (deployment.prefix_caching) settings->prefix_block_tok = deployment.block_size_tok;
  if (!startup_given) settings->startup_ms = static_cast<double>(core->ColdStartNs()) / 1e6;
  spdlog::info(
      "sim: performance model {} on {} (tp {} pp {} dp {} ep {}), engine profile {}, cold start "
      "{:.1f} s",
      model.name, hardware.name, deployment.tp, deployment.pp, deployment.dp, deployment.ep,
      deployment.engine.name, static_cast<double>(core->ColdStartNs()) / 1e9);
  *out = std::move(core);
  return Status::Ok();
}

}  // namespace servesweep::sim
