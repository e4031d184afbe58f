// SGLang: `sglang serve` with the run's layout. One node: one process. Several
// nodes: the same command on every node with --nnodes/--node-rank/--dist-init-addr (head's
// address and the run's rendezvous port); only the head serves HTTP. Data-parallel attention
// keeps the instance at tp GPUs (dp attention groups inside the TP group); plain dp runs dp
// replicas of tp GPUs each. Disaggregated: --disaggregation-mode prefill|decode instances behind
// `sglang-router launch --pd-disaggregation` on the head. Metrics need --enable-metrics (in the
// program).
#include <fmt/format.h>

#include "engines/adapters.h"
#include "engines/launch_values.h"

namespace servesweep::engines {
namespace {

void AddSettings(ArgvBuilder& b, const FlagTable& table, schema::RunSpec::Reader spec) {
  const auto layout = spec.getLayout();
  const auto config = spec.getEngineConfig();
  const Values& v = b.values();
  const uint32_t dp = layout.getDp();
  b.Add("served_model_name", "the served model name");
  b.AddIf(layout.getTp() > 1, "tp", "layout tp");
  b.AddIf(layout.getPp() > 1, "pp", "layout pp");
  if (dp > 1) {
    if (layout.getDpAttention()) {
      b.Add("dp_attention", "layout dp_attention: true");
    } else {
      b.Add("dp", "layout dp");
    }
  }
  b.AddIf(layout.getExpertParallel(), "ep", "layout ep: true");
  AddBatchingSettings(b, table);
  AddLoraSettings(b, table, config);
  using Toggle = schema::EngineConfig::Toggle;
  // Prefix caching (the radix cache) and chunked prefill are on by default in SGLang.
  b.AddIf(config.getPrefixCaching() == Toggle::OFF, "prefix_caching_off", "prefix_caching: false");
  if (config.getChunkedPrefill() == Toggle::OFF) {
    b.Add("chunked_prefill_off", "chunked_prefill: false");
  } else if (v.count("chunked_prefill_tok")) {
    b.Add("chunked_prefill_size", "engine_config.chunked_prefill_tok");
  }
  if (Status s = MapSpeculative(table, config, b); !s.ok()) b.Fail(s);
  b.AddIf(v.count("spec_method") > 0, "spec_method", "engine_config.speculative.method");
  b.AddIf(v.count("spec_model") > 0, "spec_model", "engine_config.speculative.model");
  if (v.count("spec_num_steps")) {  // the EAGLE family: all three together
    b.Add("spec_num_steps", "engine_config.speculative.num_tokens");
    b.Add("spec_eagle_topk", "engine_config.speculative.eagle_topk");
  }
  b.AddIf(v.count("spec_num_draft_tokens") > 0, "spec_num_draft_tokens",
          "engine_config.speculative.num_tokens");
  for (auto flag : spec.getEngineFlags()) b.argv().push_back(flag.cStr());
}

}  // namespace

Status SglangAdapter::PlanWithTable(const FlagTable& table, const LaunchContext& context,
                                    EngineLaunch* out) const {
  EngineLaunch& launch = *out;
  const auto spec = context.spec;
  const auto layout = spec.getLayout();
  const uint32_t nodes = context.group_size;
  const bool head = context.role == schema::Role::HEAD;

  if (layout.getPrefillInstances() > 0) {
    if (layout.getDp() > 1 && !layout.getDpAttention()) {
      return Status::InvalidArgument(
          "SGLang disaggregated layouts take dp > 1 only as dp_attention (scale replicas with "
          "prefill/decode_instances)");
    }
    std::string why;
    const std::string kv_transfer = spec.getEngineConfig().getKvTransfer().cStr();
    const KvConnector* connector = table.FindKvConnector(kv_transfer, &why);
    if (connector == nullptr) {
      return Status::InvalidArgument(why);
    }
    const auto instances = PdInstances(context, layout.getTp() * layout.getPp());
    for (const auto& instance : instances) {
      if (instance.rank != context.rank) continue;
      ArgvBuilder b(table, RunValues(context));
      b.Set("host", nodes > 1 ? "0.0.0.0" : "127.0.0.1");
      b.Set("port", std::to_string(instance.port));
      b.Set("bootstrap_port", std::to_string(instance.bootstrap_port));
      if (Status s = FillArgv(table.program, b.values(), &b.argv()); !s.ok()) b.Fail(s.message());
      b.Add("host", "the instance's address");
      b.Add("port", "the instance's port");
      b.Add(instance.prefill ? "pd_prefill" : "pd_decode", "a disaggregated layout");
      b.Set("kv_transfer", connector->engine_name);
      b.AddIf(!kv_transfer.empty(), "kv_transfer", "engine_config.kv_transfer");
      AddSettings(b, table, spec);
      if (Status s = b.status(); !s.ok()) return s;
      const std::string role = instance.prefill ? "prefill" : "decode";
      EngineProcess process{fmt::format("{}{}", role, instance.index), b.argv(), {}};
      process.env.emplace_back("CUDA_VISIBLE_DEVICES", GpuList(instance.first_gpu, instance.gpus));
      launch.processes.push_back(std::move(process));
    }
    return FinishPdLaunch(table, *connector, context, instances, &launch);
  }

  ArgvBuilder b(table, RunValues(context));
  if (Status s = FillArgv(table.program, b.values(), &b.argv()); !s.ok()) b.Fail(s.message());
  if (head) {  // other nodes run schedulers only; the head serves HTTP
    b.Add("host", "the front end's address");
    b.Add("port", "the front end's port");
  }
  AddSettings(b, table, spec);
  if (nodes > 1) {
    const std::string why = fmt::format("a layout across {} nodes", nodes);
    b.Add("nnodes", why);
    b.Add("node_rank", why);
    b.Add("dist_init_addr", why);
  }
  if (Status s = b.status(); !s.ok()) return s;
  launch.processes.push_back(
      {head ? "engine" : fmt::format("worker{}", context.rank), b.argv(), {}});
  // One engine kept across runs: the radix cache is flushed between them.
  if (nodes <= 1 && KeptAcrossRuns(spec)) launch.cache_reset_path = "/flush_cache";
  return Status::Ok();
}

}  // namespace servesweep::engines
