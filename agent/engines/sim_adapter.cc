#include "agent/engines/sim_adapter.h"

#include <fmt/format.h>

#include "agent/virtual_run.h"

namespace servesweep::agent {

EngineLaunch SimAdapter::Plan(const LaunchContext& context) const {
  EngineLaunch launch;
  launch.metrics_persona = "vllm";
  launch.version = SERVESWEEP_VERSION;
  if (context.role != schema::Role::HEAD) return launch;
  const auto sim = context.spec.getSim();
  EngineProcess process;
  process.name = "engine";
  process.argv = {context.self_executable,
                  "sim",
                  "--host",
                  "127.0.0.1",
                  "--port",
                  std::to_string(context.port),
                  "--model",
                  context.spec.getModel(),
                  "--ttft-ms",
                  fmt::format("{}", sim.getTtftMs()),
                  "--itl-ms",
                  fmt::format("{}", sim.getItlMs()),
                  "--startup-ms",
                  fmt::format("{}", sim.getStartupMs())};
  if (sim.getHardware().size() > 0) {
    // The performance model drives the timing; with startup_ms 0 the model's cold start applies.
    if (sim.getStartupMs() == 0) process.argv.resize(process.argv.size() - 2);
    const perfmodel::DeploymentConfig d = DeploymentFor(context.spec);
    const std::vector<std::string> model_flags = {"--hardware",
                                                  std::string(sim.getHardware()),
                                                  "--tp",
                                                  std::to_string(d.tp),
                                                  "--pp",
                                                  std::to_string(d.pp),
                                                  "--dp",
                                                  std::to_string(d.dp),
                                                  "--prefill-instances",
                                                  std::to_string(d.prefill_instances),
                                                  "--decode-instances",
                                                  std::to_string(d.decode_instances),
                                                  "--precision",
                                                  d.precision,
                                                  "--kv-cache-dtype",
                                                  d.kv_dtype,
                                                  "--max-num-seqs",
                                                  std::to_string(d.max_num_seqs),
                                                  "--max-num-batched-tokens",
                                                  std::to_string(d.max_num_batched_tokens),
                                                  "--spec-tokens",
                                                  std::to_string(d.spec_num_tok),
                                                  "--spec-accepted",
                                                  fmt::format("{}", d.spec_mean_accepted_tok)};
    process.argv.insert(process.argv.end(), model_flags.begin(), model_flags.end());
    if (d.ep > 1) process.argv.push_back("--expert-parallel");
    if (sim.getModelProfile().size() > 0) {
      process.argv.insert(process.argv.end(), {"--model-profile", sim.getModelProfile()});
    }
  }
  // Quality tasks: passed only when not the default (always right), so argv stays as it was.
  if (sim.getAnswerAccuracy() != 1) {
    process.argv.insert(process.argv.end(),
                        {"--answer-accuracy", fmt::format("{}", sim.getAnswerAccuracy())});
  }
  launch.processes.push_back(std::move(process));
  launch.base_url = fmt::format("http://127.0.0.1:{}", context.port);
  return launch;
}

}  // namespace servesweep::agent
