#include "engines/sim_adapter.h"

#include <fmt/format.h>

#include "perfmodel/run_deployment.h"

namespace servesweep::engines {

Status SimAdapter::Plan(const LaunchContext& context, EngineLaunch* out) const {
  EngineLaunch& launch = *out;
  launch.metrics_persona = "vllm";
  launch.version = SERVESWEEP_VERSION;
  if (context.role != schema::Role::HEAD) return Status::Ok();
  const auto sim = context.spec.getSim();
  EngineProcess process;
  process.name = "engine";
  process.argv = {context.self_executable, "sim", "--host", "127.0.0.1"};
  auto flag = [&process](const char* name, std::string value) {
    process.argv.push_back(name);
    process.argv.push_back(std::move(value));
  };
  flag("--port", std::to_string(context.port));
  flag("--model", context.spec.getModel());
  flag("--ttft-ms", fmt::format("{}", sim.getTtftMs()));
  flag("--itl-ms", fmt::format("{}", sim.getItlMs()));
  const bool model = sim.getHardware().size() > 0;
  // With the performance model and startup_ms 0, the model's own cold start applies.
  if (!model || sim.getStartupMs() != 0)
    flag("--startup-ms", fmt::format("{}", sim.getStartupMs()));
  if (model) {
    const perfmodel::DeploymentConfig d = perfmodel::DeploymentFor(context.spec);
    flag("--hardware", sim.getHardware());
    flag("--tp", std::to_string(d.tp));
    flag("--pp", std::to_string(d.pp));
    flag("--dp", std::to_string(d.dp));
    flag("--prefill-instances", std::to_string(d.prefill_instances));
    flag("--decode-instances", std::to_string(d.decode_instances));
    flag("--precision", d.precision);
    flag("--kv-cache-dtype", d.kv_dtype);
    flag("--max-num-seqs", std::to_string(d.max_num_seqs));
    flag("--max-num-batched-tokens", std::to_string(d.max_num_batched_tokens));
    flag("--spec-tokens", std::to_string(d.spec_num_tok));
    flag("--spec-accepted", fmt::format("{}", d.spec_mean_accepted_tok));
    if (d.ep > 1) process.argv.push_back("--expert-parallel");
    // Only where the matrix sets it, so every other run's command line stays as it was.
    if (context.spec.getEngineConfig().getApiServerCount() > 0)
      flag("--api-server-count", std::to_string(d.api_servers));
    if (sim.getModelProfile().size() > 0) flag("--model-profile", sim.getModelProfile());
  }
  // Quality tasks: passed only when not the default (always right), so argv stays as it was.
  if (sim.getAnswerAccuracy() != 1)
    flag("--answer-accuracy", fmt::format("{}", sim.getAnswerAccuracy()));
  const auto config = context.spec.getEngineConfig();
  if (config.getLoraAdapters().size() > 0) {
    std::string names;
    for (auto adapter : config.getLoraAdapters()) {
      names += (names.empty() ? "" : ",") + std::string(adapter.getName().cStr());
    }
    flag("--lora-modules", names);
    if (config.getMaxLoras() > 0) flag("--max-loras", std::to_string(config.getMaxLoras()));
    if (model)
      flag("--max-lora-rank", std::to_string(perfmodel::DeploymentFor(context.spec).lora_rank));
    flag("--lora-load-ms", fmt::format("{}", sim.getLoraLoadMs()));
  }
  // engine_flags go to the emulator as they are (its own flags: faults, say).
  for (auto f : context.spec.getEngineFlags()) process.argv.push_back(f.cStr());
  launch.processes.push_back(std::move(process));
  launch.cache_reset_path = "/reset_prefix_cache";
  launch.base_url = fmt::format("http://127.0.0.1:{}", context.port);
  return Status::Ok();
}

}  // namespace servesweep::engines
