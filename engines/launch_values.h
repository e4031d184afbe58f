// What the adapters of real engines share: the placeholder values of a run (its layout, engine
// config, ports, rendezvous address), an argv builder that spells keys through a flag table and
// remembers the first key the table lacks, and how instances of a disaggregated layout are laid
// out over the agents and their GPUs.
//
// Thread-safety: values; no shared state.
#pragma once

#include <string>
#include <vector>

#include "engines/engine_adapter.h"
#include "engines/flag_table.h"

namespace servesweep::engines {

// Each run owns the ports [DistPort, DistPort + kRunPortWindow): the rendezvous at +0, instance
// i's HTTP port at +1+i, the router's Prometheus listener at +39, instance i's bootstrap port at
// +40+i, KV side channels from +70.
inline constexpr uint16_t kRunPortWindow = 100;
inline constexpr uint16_t kRouterMetricsPortOffset = 39;
inline constexpr uint16_t kBootstrapPortOffset = 40;
inline constexpr uint16_t kSidePortOffset = 70;

// Placeholders every table may use: model, model_path, host, port, tp, pp, dp, ep_size, head,
// servesweep (this binary, for engines that are its subcommands),
// dist_port, nnodes, node_rank, quantization, kv_cache_dtype, max_num_seqs, max_batched_tokens,
// context_len, threads, chunked_prefill_tok, gpu_memory_fraction, spec_model, kv_transfer,
// router_metrics_port. Unset settings have no value. (Speculative values: MapSpeculative.)
Values RunValues(const LaunchContext& context);

// The rendezvous port of a run: engine_config.dist_port, else derived from the sweep name and run
// index (the same on every agent of the placement, so workers find the head without another
// message).
uint16_t DistPort(schema::RunSpec::Reader spec);

class ArgvBuilder {
 public:
  ArgvBuilder(const FlagTable& table, Values values) : table_(table), values_(std::move(values)) {}

  // Appends the table's spelling of `key`; `why` says which setting needs it (for the error).
  void Add(const std::string& key, const std::string& why);
  void AddIf(bool condition, const std::string& key, const std::string& why) {
    if (condition) Add(key, why);
  }
  void Set(const std::string& name, std::string value) { values_[name] = std::move(value); }
  const Values& values() const { return values_; }

  Argv& argv() { return argv_; }
  const std::string& error() const { return error_; }
  // The error is the run's own settings against this table: the same on every node.
  bool permanent() const { return permanent_; }
  void Fail(const std::string& error, bool permanent = false) {
    if (error_.empty()) {
      error_ = error;
      permanent_ = permanent;
    }
  }
  void Fail(const Status& status) {
    Fail(status.message(), status.code() == StatusCode::kInvalidArgument);
  }
  // The first error: InvalidArgument when permanent, else FailedPrecondition; Ok when none.
  Status status() const {
    if (error_.empty()) return Status::Ok();
    return permanent_ ? Status::InvalidArgument(error_) : Status::FailedPrecondition(error_);
  }

 private:
  const FlagTable& table_;
  Values values_;
  Argv argv_;
  std::string error_;
  bool permanent_ = false;
};

// Multi-LoRA (engine_config.lora): the enable flag where the table has one, the adapters
// (`lora_modules` then one `lora_module` per adapter, {lora_name}/{lora_path}; or `lora_paths`,
// the files comma-joined), and the slots,
// rank, host-memory slots and backend where set; a key the table lacks fails the run (permanent).
void AddLoraSettings(ArgvBuilder& b, const FlagTable& table, schema::EngineConfig::Reader config);

// The settings every engine spells the same way when the matrix gives them: quantization (by
// the table's quantization_names), KV dtype, batching limits, context length and GPU memory
// fraction (vLLM, SGLang).
void AddBatchingSettings(ArgvBuilder& b, const FlagTable& table);

// The matrix's speculative decoding in this engine's terms (the table's `speculative`): sets
// spec_method (the engine's name), spec_num_tokens, and for draft-tree methods spec_num_steps,
// spec_eagle_topk and spec_num_draft_tokens together (else spec_num_draft_tokens = num_tokens +
// 1 where the engine counts the root token). InvalidArgument, before anything starts, for a
// method the engine lacks, a missing count it requires, or tree knobs it does not take.
Status MapSpeculative(const FlagTable& table, schema::EngineConfig::Reader config, ArgvBuilder& b);

// One engine instance of a disaggregated layout: prefill instances first, then decode ones,
// filled onto agents in rank order, `gpus` GPUs each.
struct PdInstance {
  bool prefill = true;
  uint32_t index = 0;      // among its kind
  uint32_t rank = 0;       // the agent that runs it
  uint32_t first_gpu = 0;  // on that agent
  uint32_t gpus = 1;
  uint16_t port = 0;
  uint16_t bootstrap_port = 0;  // prefill instances (SGLang, vLLM's Mooncake)
  uint16_t side_port = 0;       // KV side channel (vLLM NIXL): the first of its ports
};
// `side_ports_per_instance`: ports each instance's side channel takes (vLLM 0.11.0's NIXL: one
// per TP rank), so instances on one node never share one.
std::vector<PdInstance> PdInstances(const LaunchContext& context, uint32_t gpus_per_instance,
                                    uint32_t side_ports_per_instance = 1);
// InvalidArgument when the side channels run past the run's port window.
Status CheckPdPorts(const std::vector<PdInstance>& instances, uint32_t side_ports_per_instance,
                    uint16_t base);

// The head's router in front of a disaggregated layout (the table's router_program, its
// kv_connector group when the connector names one, one router_prefill (router_prefill_bootstrap
// for a bootstrap connector) / router_decode group per instance, {url} and {bootstrap_port}
// filled) added to launch->processes. InvalidArgument when the table has no router (or its
// argv cannot be filled), FailedPrecondition when an instance's agent address is unknown.
Status AddPdRouter(const FlagTable& table, const KvConnector& connector,
                   const LaunchContext& context, const std::vector<PdInstance>& instances,
                   EngineLaunch* launch);

// The end of a disaggregated launch: on the head, the router (AddPdRouter) and the metrics of
// decode instance 0 when the head runs it, else the router's own names (no persona).
Status FinishPdLaunch(const FlagTable& table, const KvConnector& connector,
                      const LaunchContext& context, const std::vector<PdInstance>& instances,
                      EngineLaunch* launch);

// Whether the run's engine may serve later runs of its configuration (engine_lifecycle
// per_configuration): then it needs its prefix-cache reset between them.
bool KeptAcrossRuns(schema::RunSpec::Reader spec);

// "0,1,2,3" for `gpus` GPUs from `first`.
std::string GpuList(uint32_t first, uint32_t gpus);

// The address other agents reach agent `rank` at ("" when unknown); 127.0.0.1 on one node.
std::string AddressOf(const LaunchContext& context, uint32_t rank);

// GPUs each agent contributes: the context's, the layout's gpus_per_node, else all on one.
uint32_t GpusPerNode(const LaunchContext& context);

// Common epilogue: the head's URL, persona, version command and the model file to fingerprint.
void FinishLaunch(const FlagTable& table, const LaunchContext& context, EngineLaunch* launch);

// The common start of an adapter's Plan(): `engine`'s flag table for the spec's version into
// *table, then FinishLaunch(). InvalidArgument when no table fits.
Status BeginLaunch(const char* engine, const LaunchContext& context, FlagTable* table,
                   EngineLaunch* launch);

}  // namespace servesweep::engines
