// vLLM: `vllm serve MODEL` with the run's layout. One node: one process. Several nodes: data
// parallelism across nodes when one TP*PP group fits a node (head: the front end and its local
// DP engines; workers: `--headless` with their start rank), else one TP*PP group across nodes
// (`--nnodes/--node-rank/--master-addr`, workers headless). Disaggregated: prefill instances
// (kv_producer) and decode instances (kv_consumer) of the run's KV connector behind vllm-router
// on the head (told the connector, and each prefill instance's bootstrap port where it has one).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "engines/adapters.h"
#include "engines/launch_values.h"

namespace servesweep::engines {
namespace {

// Flags of the engine's settings, the same on every process of the run.
void AddSettings(ArgvBuilder& b, const FlagTable& table, schema::RunSpec::Reader spec) {
  const auto layout = spec.getLayout();
  const auto config = spec.getEngineConfig();
  const Values& v = b.values();
  b.Add("served_model_name", "the served model name");
  b.AddIf(layout.getExpertParallel(), "ep", "layout ep: true");
  AddBatchingSettings(b, table);
  AddLoraSettings(b, table, config);
  using Toggle = schema::EngineConfig::Toggle;
  b.AddIf(config.getPrefixCaching() == Toggle::ON, "prefix_caching_on", "prefix_caching: true");
  b.AddIf(config.getPrefixCaching() == Toggle::OFF, "prefix_caching_off", "prefix_caching: false");
  b.AddIf(config.getChunkedPrefill() == Toggle::ON, "chunked_prefill_on", "chunked_prefill: true");
  b.AddIf(config.getChunkedPrefill() == Toggle::OFF, "chunked_prefill_off",
          "chunked_prefill: false");
  if (Status s = MapSpeculative(table, config, b); !s.ok()) b.Fail(s);
  if (v.count("spec_method") || v.count("spec_model")) {
    nlohmann::ordered_json speculative = nlohmann::ordered_json::object();
    if (v.count("spec_method")) speculative["method"] = v.at("spec_method");
    if (v.count("spec_model")) speculative["model"] = v.at("spec_model");
    if (v.count("spec_num_tokens")) {
      speculative["num_speculative_tokens"] = std::stoul(v.at("spec_num_tokens"));
    }
    b.Set("spec_json", speculative.dump());
    b.Add("speculative", "engine_config.speculative");
  }
}

void AddUserFlags(ArgvBuilder& b, schema::RunSpec::Reader spec) {
  for (auto flag : spec.getEngineFlags()) b.argv().push_back(flag.cStr());
}

// A node of a layout across nodes: the head serves the front end, a worker runs headless; both
// carry the model-parallel sizes.
void AddNodeRoleAndModelParallel(ArgvBuilder& b, bool head, const std::string& worker_why,
                                 uint32_t tp, uint32_t pp) {
  if (head) {
    b.Add("host", "the front end's address");
    b.Add("port", "the front end's port");
  } else {
    b.Add("headless", worker_why);
  }
  b.AddIf(tp > 1, "tp", "layout tp");
  b.AddIf(pp > 1, "pp", "layout pp");
}

}  // namespace

Status VllmAdapter::PlanWithTable(const FlagTable& table, const LaunchContext& context,
                                  EngineLaunch* out) const {
  EngineLaunch& launch = *out;
  const auto spec = context.spec;
  const auto layout = spec.getLayout();
  const uint32_t tp = layout.getTp(), pp = layout.getPp(), dp = layout.getDp();
  const uint32_t nodes = context.group_size;
  if (layout.getDpAttention()) {
    return Status::InvalidArgument(
        "vLLM has no data-parallel attention inside one TP group (layout dp_attention is "
        "SGLang's); with vLLM use dp (each DP rank its own GPUs) and ep for MoE");
  }
  const bool head = context.role == schema::Role::HEAD;

  if (layout.getPrefillInstances() > 0) {
    if (dp > 1) {
      return Status::InvalidArgument(
          "vLLM disaggregated layouts take dp: 1 (scale with prefill/decode_instances)");
    }
    std::string why;
    const KvConnector* connector =
        table.FindKvConnector(spec.getEngineConfig().getKvTransfer().cStr(), &why);
    if (connector == nullptr) {
      return Status::InvalidArgument(why);
    }
    const uint32_t side_ports = table.side_port_per_rank ? tp : 1;
    const auto instances = PdInstances(context, tp * pp, side_ports);
    if (Status s = CheckPdPorts(instances, side_ports, DistPort(spec)); !s.ok()) return s;
    for (const auto& instance : instances) {
      if (instance.rank != context.rank) continue;
      ArgvBuilder b(table, RunValues(context));
      b.Set("host", nodes > 1 ? "0.0.0.0" : "127.0.0.1");
      b.Set("port", std::to_string(instance.port));
      const std::string role = instance.prefill ? "prefill" : "decode";
      nlohmann::ordered_json kv;
      kv["kv_connector"] = connector->engine_name;
      kv["kv_role"] = table.kv_roles.count(role) ? table.kv_roles.at(role) : role;
      b.Set("kv_transfer_json", kv.dump());
      b.Set("side_port", std::to_string(instance.side_port));
      b.Set("bootstrap_port", std::to_string(instance.bootstrap_port));
      b.Set("address", nodes > 1 ? AddressOf(context, instance.rank) : "127.0.0.1");
      if (Status s = FillArgv(table.program, b.values(), &b.argv()); !s.ok()) b.Fail(s.message());
      b.Add("host", "the instance's address");
      b.Add("port", "the instance's port");
      b.AddIf(tp > 1, "tp", "layout tp");
      b.AddIf(pp > 1, "pp", "layout pp");
      AddSettings(b, table, spec);
      b.Add(instance.prefill ? "pd_prefill" : "pd_decode", "a disaggregated layout");
      AddUserFlags(b, spec);
      if (Status s = b.status(); !s.ok()) return s;
      EngineProcess process{fmt::format("{}{}", role, instance.index), b.argv(), {}};
      process.env.emplace_back("CUDA_VISIBLE_DEVICES", GpuList(instance.first_gpu, instance.gpus));
      for (const auto* env : {&connector->env, &connector->prefill_env}) {
        if (env == &connector->prefill_env && !instance.prefill) continue;
        for (const auto& [name, pattern] : *env) {
          std::string value;
          if (Status s = FillPlaceholders(pattern, b.values(), &value); !s.ok()) {
            return Status::InvalidArgument(s.message());
          }
          process.env.emplace_back(name, value);
        }
      }
      launch.processes.push_back(std::move(process));
    }
    return FinishPdLaunch(table, *connector, context, instances, &launch);
  }

  ArgvBuilder b(table, RunValues(context));
  if (Status s = FillArgv(table.program, b.values(), &b.argv()); !s.ok()) b.Fail(s.message());
  const uint32_t gpus_per_node = GpusPerNode(context);
  if (nodes <= 1) {
    b.Add("host", "the front end's address");
    b.Add("port", "the front end's port");
    b.AddIf(tp > 1, "tp", "layout tp");
    b.AddIf(pp > 1, "pp", "layout pp");
    b.AddIf(dp > 1, "dp", "layout dp");
  } else if (tp * pp <= gpus_per_node) {
    // Data parallelism across nodes: dp_local engines per node.
    if (dp % nodes != 0) {
      return Status::InvalidArgument(fmt::format(
          "vLLM data parallelism across {} nodes needs dp divisible by the node count, found "
          "dp={}",
          nodes, dp));
    }
    b.Set("dp_local", std::to_string(dp / nodes));
    b.Set("dp_start_rank", std::to_string(context.rank * (dp / nodes)));
    AddNodeRoleAndModelParallel(b, head, "a worker node of data parallelism across nodes", tp, pp);
    b.Add("dp", "layout dp across nodes");
    b.Add("dp_local", "layout dp across nodes");
    b.AddIf(!head, "dp_start_rank", "a worker node of data parallelism across nodes");
    b.Add("dp_address", "layout dp across nodes");
    b.Add("dp_rpc_port", "layout dp across nodes");
  } else {
    // One TP*PP group spans nodes.
    if (dp > 1) {
      return Status::InvalidArgument(fmt::format(
          "vLLM: a TP*PP group of {} GPUs spans nodes of {} GPUs, which works only with dp: 1 "
          "(found dp={})",
          tp * pp, gpus_per_node, dp));
    }
    AddNodeRoleAndModelParallel(b, head, "a worker node of a TP*PP group across nodes", tp, pp);
    const std::string why = fmt::format("tp*pp={} across {} nodes", tp * pp, nodes);
    b.Add("nnodes", why);
    b.Add("node_rank", why);
    b.Add("master_addr", why);
    b.Add("master_port", why);
  }
  AddSettings(b, table, spec);
  AddUserFlags(b, spec);
  if (Status s = b.status(); !s.ok()) return s;
  EngineProcess process{head ? "engine" : fmt::format("worker{}", context.rank), b.argv(), {}};
  // One engine kept across runs: its prefix cache is reset between them, an endpoint vLLM
  // serves only in its development mode.
  if (nodes <= 1 && KeptAcrossRuns(spec)) {
    process.env.emplace_back("VLLM_SERVER_DEV_MODE", "1");
    launch.cache_reset_path = "/reset_prefix_cache";
  }
  launch.processes.push_back(std::move(process));
  return Status::Ok();
}

}  // namespace servesweep::engines
