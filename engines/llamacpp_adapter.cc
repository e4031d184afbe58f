// llama.cpp: llama-server on one node, CPU or one GPU, with --metrics. Slots (-np) are
// engine_config.max_num_seqs; the context (-c) is shared by all slots.
#include <fmt/format.h>

#include "engines/adapters.h"
#include "engines/launch_values.h"

namespace servesweep::engines {

Status LlamacppAdapter::PlanWithTable(const FlagTable& table, const LaunchContext& context,
                                      EngineLaunch* out) const {
  EngineLaunch& launch = *out;
  const auto spec = context.spec;
  const auto layout = spec.getLayout();
  if (context.group_size > 1 || layout.getPrefillInstances() > 0 || layout.getTp() > 1 ||
      layout.getPp() > 1 || layout.getDp() > 1) {
    return Status::InvalidArgument(fmt::format(
        "llama.cpp runs one server on one node: expected tp=pp=dp=1 without disaggregation, "
        "found tp={} pp={} dp={} prefill_instances={} on {} node(s)",
        layout.getTp(), layout.getPp(), layout.getDp(), layout.getPrefillInstances(),
        context.group_size));
  }
  if (context.role != schema::Role::HEAD) return Status::Ok();
  ArgvBuilder b(table, RunValues(context));
  if (Status s = FillArgv(table.program, b.values(), &b.argv()); !s.ok()) b.Fail(s.message());
  const Values& v = b.values();
  b.Add("served_model_name", "the served model name");
  b.Add("host", "the server's address");
  b.Add("port", "the server's port");
  b.AddIf(v.count("max_num_seqs") > 0, "max_num_seqs", "engine_config.max_num_seqs (slots)");
  b.AddIf(v.count("max_batched_tokens") > 0, "max_batched_tokens",
          "engine_config.max_batched_tokens");
  b.AddIf(v.count("context_len") > 0, "context_len", "engine_config.context_len");
  b.AddIf(v.count("threads") > 0, "threads", "engine_config.threads");
  // llama-server has one HTTP front end: its table has no spelling, so the run is refused.
  b.AddIf(v.count("api_server_count") > 0, "api_server_count", "engine_config.api_server_count");
  using Toggle = schema::EngineConfig::Toggle;
  const auto config = spec.getEngineConfig();
  b.AddIf(config.getPrefixCaching() == Toggle::ON, "prefix_caching_on", "prefix_caching: true");
  b.AddIf(config.getPrefixCaching() == Toggle::OFF, "prefix_caching_off", "prefix_caching: false");
  AddLoraSettings(b, table, config);
  b.AddIf(config.getChunkedPrefill() != Toggle::DEFAULT, "chunked_prefill",
          "chunked_prefill (llama.cpp always splits prompts into -b batches)");
  b.AddIf(v.count("spec_model") > 0, "spec_model", "engine_config.speculative.model");
  if (config.getSpecNumTokens() > 0) {
    b.Set("spec_num_tokens", std::to_string(config.getSpecNumTokens()));
  }
  b.AddIf(v.count("spec_num_tokens") > 0, "spec_num_tokens",
          "engine_config.speculative.num_tokens");
  b.AddIf(v.count("quantization") > 0, "quantization",
          "quantization (a GGUF file carries its own; name the file in model_path)");
  b.AddIf(v.count("kv_cache_dtype") > 0, "kv_cache_dtype", "kv_cache_dtype");
  // The same server in both lifecycles, so a cold engine per run measures what a kept one does.
  // A kept engine cannot have the host-RAM prompt cache (no endpoint clears it), and with it on
  // the server batches simultaneous arrivals differently (TTFT -45%, TPOT +64% at 4 requests on
  // 4 slots; bench/README.md, "Why concurrency 4 differed"), so it is off in both.
  b.Set("slot_save_path", "/tmp");
  b.Add("slot_save_path", "slot erase between runs of one engine");
  b.Add("prompt_cache_ram_off", "the same server in both lifecycles (a cache no endpoint clears)");
  if (KeptAcrossRuns(spec)) {
    // Its slots' caches are erased between runs (the agent lists the slots, then erases each).
    launch.cache_reset_path = "/slots/{slot}?action=erase";
    launch.reset_probe_words = 32;
  }
  for (auto flag : spec.getEngineFlags()) b.argv().push_back(flag.cStr());
  if (Status s = b.status(); !s.ok()) return s;
  launch.processes.push_back({"engine", b.argv(), {}});
  return Status::Ok();
}

}  // namespace servesweep::engines
