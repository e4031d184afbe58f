#include "engines/launch_values.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "common/ids.h"

namespace servesweep::engines {
namespace {

// "a, b, c", or "none".
std::string KeyList(const std::map<std::string, std::string>& map) {
  std::string out;
  for (const auto& [key, value] : map) out += (out.empty() ? "" : ", ") + key;
  return out.empty() ? "none" : out;
}

std::string ItemList(const std::vector<std::string>& items) {
  return items.empty() ? "none" : fmt::format("{}", fmt::join(items, ", "));
}

}  // namespace

uint16_t DistPort(schema::RunSpec::Reader spec) {
  if (spec.getEngineConfig().getDistPort() != 0) return spec.getEngineConfig().getDistPort();
  // 20000..39899 in steps of 100: each run's ports (rendezvous, instances, side channels) lie in
  // [port, port + 100).
  // Keyed by sweep and run index, not the run id: the id also hashes every condition, so any
  // new schema field would move every port.
  const uint64_t hash =
      StableHash64(fmt::format("{}/{}", spec.getSweepName().cStr(), spec.getIndex()));
  return static_cast<uint16_t>(20000 + (hash % 199) * 100);
}

Values RunValues(const LaunchContext& context) {
  const auto spec = context.spec;
  const auto layout = spec.getLayout();
  const auto config = spec.getEngineConfig();
  Values v;
  auto set_uint = [&v](const char* name, uint64_t value) {
    if (value > 0) v[name] = std::to_string(value);
  };
  auto set_text = [&v](const char* name, capnp::Text::Reader value) {
    if (value.size() > 0) v[name] = value.cStr();
  };
  v["model"] = spec.getModel().cStr();
  v["model_path"] = config.getModelPath().size() ? config.getModelPath().cStr() : v["model"];
  v["host"] = "127.0.0.1";
  v["port"] = std::to_string(context.port);
  v["tp"] = std::to_string(layout.getTp());
  v["pp"] = std::to_string(layout.getPp());
  v["dp"] = std::to_string(layout.getDp());
  v["ep_size"] = std::to_string(layout.getTp());
  v["head"] = context.head_address.empty() ? "127.0.0.1" : context.head_address;
  v["dist_port"] = std::to_string(DistPort(spec));
  v["nnodes"] = std::to_string(context.group_size);
  v["node_rank"] = std::to_string(context.rank);
  v["rank"] = std::to_string(context.rank);
  v["servesweep"] = context.self_executable;
  set_text("quantization", spec.getQuantization());
  set_text("kv_cache_dtype", spec.getKvCacheDtype());
  set_uint("max_num_seqs", config.getMaxNumSeqs());
  set_uint("max_batched_tokens", config.getMaxBatchedTokens());
  set_uint("context_len", config.getContextLenTok());
  set_uint("threads", config.getThreads());
  set_uint("api_server_count", config.getApiServerCount());
  set_uint("chunked_prefill_tok", config.getChunkedPrefillTok());
  set_uint("spec_num_tokens", config.getSpecNumTokens());
  if (config.getGpuMemoryFraction() > 0) {
    v["gpu_memory_fraction"] = fmt::format("{}", config.getGpuMemoryFraction());
  }
  set_text("spec_model", config.getSpecModel());
  set_text("kv_transfer", config.getKvTransfer());
  v["router_metrics_port"] = std::to_string(DistPort(spec) + kRouterMetricsPortOffset);
  return v;
}

Status MapSpeculative(const FlagTable& table, schema::EngineConfig::Reader config, ArgvBuilder& b) {
  std::string method = config.getSpecMethod().cStr();
  std::transform(method.begin(), method.end(), method.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const uint32_t tokens = config.getSpecNumTokens();
  const uint32_t topk = config.getSpecEagleTopk(), draft = config.getSpecNumDraftTokens();
  if (method.empty() && config.getSpecModel().size() == 0) {
    if (tokens > 0 || topk > 0 || draft > 0) {
      return Status::InvalidArgument(
          "engine_config.speculative: expected a method (or a draft model) with its token "
          "counts, found counts alone");
    }
    return Status::Ok();
  }
  const SpeculativeMap& map = table.speculative;
  const std::string where = fmt::format("{} {}", table.engine, table.version);
  auto listed = [](const std::vector<std::string>& list, const std::string& item) {
    return std::find(list.begin(), list.end(), item) != list.end();
  };
  if (method.empty()) {
    if (!map.draft_tree.empty()) {  // SGLang names the algorithm; vLLM reads the draft's
      return Status::InvalidArgument(fmt::format(
          "engine_config.speculative: {} needs a method beside the draft model; expected "
          "one of {}",
          where, KeyList(map.methods)));
    }
  } else {
    auto it = map.methods.find(method);
    if (it == map.methods.end()) {  // the engine's own name is taken as it is
      it = std::find_if(map.methods.begin(), map.methods.end(), [&](const auto& entry) {
        std::string name = entry.second;
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        return name == method;
      });
    }
    if (it == map.methods.end()) {
      return Status::InvalidArgument(fmt::format(
          "engine_config.speculative.method '{}' has no counterpart in {}: expected one of {}",
          method, where, KeyList(map.methods)));
    }
    b.Set("spec_method", it->second);
  }
  if (!method.empty() && map.methods.find(method) == map.methods.end()) {
    for (const auto& [name, engine_name] : map.methods) {
      if (engine_name == b.values().at("spec_method")) method = name;  // its matrix spelling
    }
  }
  const bool tree = listed(map.draft_tree, method);
  if (!tree && (topk > 0 || draft > 0)) {
    return Status::InvalidArgument(
        map.draft_tree.empty()
            ? fmt::format("engine_config.speculative: eagle_topk and num_draft_tokens shape a "
                          "draft tree, which {} does not take (it drafts a chain of num_tokens)",
                          where)
            : fmt::format("engine_config.speculative: eagle_topk and num_draft_tokens shape a "
                          "draft tree, which {} takes for {} only, not '{}'",
                          where, ItemList(map.draft_tree), method));
  }
  if (tokens == 0 && listed(map.needs_num_tokens, method)) {
    return Status::InvalidArgument(fmt::format(
        "engine_config.speculative.num_tokens: {} needs the draft tokens per step for '{}' "
        "(it refuses a draft model without them); expected num_tokens: N",
        where, method));
  }
  if (tokens > 0) b.Set("spec_num_tokens", std::to_string(tokens));
  if (tree) {
    // Steps, top-k and draft tokens go together: a chain of N steps verifies N + 1 tokens.
    if (tokens == 0) {
      if (topk > 0 || draft > 0) {
        return Status::InvalidArgument(fmt::format(
            "engine_config.speculative: {} takes steps, eagle_topk and num_draft_tokens "
            "together; expected num_tokens (the steps) with them",
            where));
      }
      return Status::Ok();  // the engine picks all three
    }
    const uint32_t k = topk > 0 ? topk : 1;
    if (k > 1 && draft == 0) {
      return Status::InvalidArgument(fmt::format(
          "engine_config.speculative: eagle_topk {} makes a tree; {} needs its size too "
          "(num_draft_tokens, the verified root token included)",
          k, where));
    }
    b.Set("spec_num_steps", std::to_string(tokens));
    b.Set("spec_eagle_topk", std::to_string(k));
    b.Set("spec_num_draft_tokens", std::to_string(draft > 0 ? draft : tokens + 1));
  } else if (tokens > 0 && !map.draft_tree.empty()) {
    // Engines with draft trees count the verified root token in their draft tokens.
    b.Set("spec_num_draft_tokens", std::to_string(tokens + 1));
  }
  return Status::Ok();
}

void ArgvBuilder::Add(const std::string& key, const std::string& why) {
  if (!error_.empty()) return;
  const auto& known = FlagKeys();
  if (std::find(known.begin(), known.end(), key) == known.end()) {
    Fail(
        fmt::format("internal: the adapter asked for flag key '{}', which no flag table may hold "
                    "(engines/flag_table.cc)",
                    key));
    return;
  }
  auto it = table_.flags.find(key);
  if (it == table_.flags.end()) {
    // The same table on every node: another attempt fails the same.
    Fail(fmt::format("{} {} has no flag for '{}' (needed for {}); flag table read from {}",
                     table_.engine, table_.version, key, why, table_.source),
         true);
    return;
  }
  if (Status s = FillArgv(it->second, values_, &argv_); !s.ok()) {
    Fail(fmt::format("{} {} flag '{}': {}", table_.engine, table_.version, key, s.message()), true);
  }
}

uint32_t GpusPerNode(const LaunchContext& context) {
  if (context.gpus_per_node > 0) return context.gpus_per_node;
  const auto layout = context.spec.getLayout();
  if (layout.getGpusPerNode() > 0) return layout.getGpusPerNode();
  const uint32_t total = std::max<uint32_t>(1, context.spec.getGpusNeeded());
  return (total + context.group_size - 1) / context.group_size;
}

std::vector<PdInstance> PdInstances(const LaunchContext& context, uint32_t gpus_per_instance,
                                    uint32_t side_ports_per_instance) {
  const auto layout = context.spec.getLayout();
  const uint32_t total = layout.getPrefillInstances() + layout.getDecodeInstances();
  const uint32_t per_node = std::max<uint32_t>(1, GpusPerNode(context) / gpus_per_instance);
  const uint16_t base = DistPort(context.spec);
  std::vector<PdInstance> out;
  for (uint32_t i = 0; i < total; ++i) {
    PdInstance instance;
    instance.prefill = i < layout.getPrefillInstances();
    instance.index = instance.prefill ? i : i - layout.getPrefillInstances();
    instance.rank = std::min(i / per_node, context.group_size - 1);
    instance.first_gpu = (i % per_node) * gpus_per_instance;
    instance.gpus = gpus_per_instance;
    instance.port = static_cast<uint16_t>(base + 1 + i);
    instance.bootstrap_port = static_cast<uint16_t>(base + kBootstrapPortOffset + i);
    instance.side_port =
        static_cast<uint16_t>(base + kSidePortOffset + (i % per_node) * side_ports_per_instance);
    out.push_back(instance);
  }
  return out;
}

Status CheckPdPorts(const std::vector<PdInstance>& instances, uint32_t side_ports_per_instance,
                    uint16_t base) {
  for (const auto& instance : instances) {
    if (uint32_t{instance.side_port} + side_ports_per_instance > uint32_t{base} + kRunPortWindow) {
      return Status::InvalidArgument(fmt::format(
          "the KV side channels of {} instance(s) per node, {} port(s) each, do not fit the run's "
          "ports {}..{} (side channels from {}); use fewer instances per node or an engine "
          "version with one side-channel port per instance",
          instances.size(), side_ports_per_instance, base, base + kRunPortWindow - 1,
          base + kSidePortOffset));
    }
  }
  return Status::Ok();
}

Status AddPdRouter(const FlagTable& table, const KvConnector& connector,
                   const LaunchContext& context, const std::vector<PdInstance>& instances,
                   EngineLaunch* launch) {
  if (table.router_program.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{} {} flag table has no router for disaggregated layouts", table.engine, table.version));
  }
  Values values = RunValues(context);
  values["router_kv_connector"] = connector.router_name;
  Argv router;
  Status s = FillArgv(table.router_program, values, &router);
  if (s.ok() && !connector.router_name.empty() && !table.router_kv_connector.empty()) {
    s = FillArgv(table.router_kv_connector, values, &router);
  }
  const Argv& prefill = connector.bootstrap && !table.router_prefill_bootstrap.empty()
                            ? table.router_prefill_bootstrap
                            : table.router_prefill;
  for (const auto& instance : instances) {
    const std::string address = AddressOf(context, instance.rank);
    if (address.empty()) {
      return Status::FailedPrecondition(
          fmt::format("the router needs the address of agent rank {} (instance {}{}), which this "
                      "assignment does not carry",
                      instance.rank, instance.prefill ? "prefill" : "decode", instance.index));
    }
    values["url"] = fmt::format("http://{}:{}", address, instance.port);
    values["bootstrap_port"] = std::to_string(instance.bootstrap_port);
    if (s.ok()) s = FillArgv(instance.prefill ? prefill : table.router_decode, values, &router);
  }
  if (!s.ok()) return Status::InvalidArgument(s.message());
  launch->processes.push_back({"router", router, {}});
  return Status::Ok();
}

Status FinishPdLaunch(const FlagTable& table, const KvConnector& connector,
                      const LaunchContext& context, const std::vector<PdInstance>& instances,
                      EngineLaunch* launch) {
  if (context.role == schema::Role::HEAD) {
    for (const auto& instance : instances) {
      if (instance.prefill || instance.rank != 0) continue;
      launch->metrics_url = fmt::format("http://127.0.0.1:{}/metrics", instance.port);
      break;
    }
    if (Status s = AddPdRouter(table, connector, context, instances, launch); !s.ok()) return s;
  }
  if (launch->metrics_url.empty()) launch->metrics_persona.clear();
  return Status::Ok();
}

bool KeptAcrossRuns(schema::RunSpec::Reader spec) {
  return spec.getEngineLifecycle() == schema::EngineLifecycle::PER_CONFIGURATION;
}

std::string GpuList(uint32_t first, uint32_t gpus) {
  std::string out;
  for (uint32_t g = first; g < first + gpus; ++g)
    out += (out.empty() ? "" : ",") + std::to_string(g);
  return out;
}

std::string AddressOf(const LaunchContext& context, uint32_t rank) {
  if (context.group_size <= 1) return "127.0.0.1";
  if (rank == 0 && !context.head_address.empty()) return context.head_address;
  if (rank < context.peer_addresses.size()) return context.peer_addresses[rank];
  return "";
}

Status BeginLaunch(const char* engine, const LaunchContext& context, FlagTable* table,
                   EngineLaunch* launch) {
  if (Status s = FindFlagTable(engine, context.spec.getEngineVersion().cStr(), table); !s.ok()) {
    return Status::InvalidArgument(s.message());
  }
  launch->unchecked = table->unchecked;
  FinishLaunch(*table, context, launch);
  return Status::Ok();
}

void FinishLaunch(const FlagTable& table, const LaunchContext& context, EngineLaunch* launch) {
  if (context.role == schema::Role::HEAD) {
    launch->base_url = fmt::format("http://127.0.0.1:{}", context.port);
  }
  launch->metrics_persona = table.metrics;
  launch->reuse_connections = table.reuse_connections;
  launch->version_command = table.version_command;
  launch->flag_source = fmt::format("{} {} ({})", table.engine, table.version, table.source);
  const auto config = context.spec.getEngineConfig();
  const std::string path =
      config.getModelPath().size() ? config.getModelPath().cStr() : context.spec.getModel().cStr();
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    launch->model_file = path;
  } else if (std::filesystem::is_regular_file(path + "/config.json", ec)) {
    launch->model_file = path + "/config.json";
  }
}

void AddBatchingSettings(ArgvBuilder& b, const FlagTable& table) {
  const Values& v = b.values();
  if (auto it = v.find("quantization"); it != v.end()) {
    if (auto name = table.quantization_names.find(it->second);
        name != table.quantization_names.end()) {
      b.Set("quantization", name->second);
    }
  }
  b.AddIf(v.count("quantization") > 0, "quantization", "quantization");
  b.AddIf(v.count("kv_cache_dtype") > 0, "kv_cache_dtype", "kv_cache_dtype");
  b.AddIf(v.count("max_num_seqs") > 0, "max_num_seqs", "engine_config.max_num_seqs");
  b.AddIf(v.count("max_batched_tokens") > 0, "max_batched_tokens",
          "engine_config.max_batched_tokens");
  b.AddIf(v.count("context_len") > 0, "context_len", "engine_config.context_len");
  b.AddIf(v.count("gpu_memory_fraction") > 0, "gpu_memory_fraction",
          "engine_config.gpu_memory_fraction");
  b.AddIf(v.count("api_server_count") > 0, "api_server_count", "engine_config.api_server_count");
}

// The slots, rank, host-memory slots and backend of engine_config.lora, where set.
namespace {

void AddLoraSlots(ArgvBuilder& b, schema::EngineConfig::Reader config) {
  struct Setting {
    uint32_t value;
    const char* key;
    const char* why;
  };
  for (const Setting& setting :
       {Setting{config.getMaxLoras(), "max_loras", "engine_config.lora.max_loras"},
        Setting{config.getMaxLoraRank(), "max_lora_rank", "engine_config.lora.max_rank"},
        Setting{config.getMaxCpuLoras(), "max_cpu_loras", "engine_config.lora.max_cpu_loras"}}) {
    if (setting.value == 0) continue;
    b.Set(setting.key, std::to_string(setting.value));
    b.Add(setting.key, setting.why);
  }
  if (config.getLoraBackend().size() > 0) {
    b.Set("lora_backend", config.getLoraBackend());
    b.Add("lora_backend", "engine_config.lora.backend");
  }
}

}  // namespace

void AddLoraSettings(ArgvBuilder& b, const FlagTable& table, schema::EngineConfig::Reader config) {
  const auto adapters = config.getLoraAdapters();
  if (adapters.size() == 0) return;
  b.AddIf(table.Has("lora_on"), "lora_on", "engine_config.lora");
  if (table.Has("lora_paths")) {
    // One value of comma-joined files (llama.cpp): a comma inside a path cannot be said.
    std::string paths;
    for (auto adapter : adapters) {
      const std::string path = adapter.getPath();
      if (path.find(',') != std::string::npos) {
        return b.Fail(fmt::format("{} takes LoRA files as one comma-joined list: expected a path "
                                  "without ',', found '{}'",
                                  table.engine, path),
                      true);
      }
      paths += (paths.empty() ? "" : ",") + path;
    }
    b.Set("lora_paths", paths);
    b.Add("lora_paths", "engine_config.lora.adapters");
    return AddLoraSlots(b, config);
  }
  // One flag followed by every adapter as name=path (vLLM, SGLang: nargs).
  b.AddIf(table.Has("lora_modules"), "lora_modules", "engine_config.lora.adapters");
  for (auto adapter : adapters) {
    b.Set("lora_name", adapter.getName());
    b.Set("lora_path", adapter.getPath());
    b.Add("lora_module", "engine_config.lora.adapters");
  }
  AddLoraSlots(b, config);
}

}  // namespace servesweep::engines
