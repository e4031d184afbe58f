// Hardware and model profiles for the performance model: plain structs in SI units (bytes,
// FLOP/s, ns), read from YAML files a user can write. The profiles shipped in profiles/hardware/
// and profiles/models/ are embedded in the library, so a bare name ("h200", "llama-3.1-8b")
// needs no file; anything with a '/' or a .yaml/.yml suffix is read as a path.
//
//   perfmodel::HardwareProfile gpu;
//   perfmodel::ModelProfile model;
//   Status s = perfmodel::LoadHardwareProfile("h200", &gpu);
//   if (s.ok()) s = perfmodel::LoadModelProfile("profiles/models/my-model.yaml", &model);
//
// Loading errors say file:line:column, what was expected and what was found; unknown keys are
// errors (with the closest known key). The file formats are documented in docs/perfmodel.md and
// by the shipped files.
//
// Thread-safety: pure functions over values; a loaded profile is an immutable value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace servesweep::perfmodel {

// One accelerator (or CPU socket) and the links around it. Peaks are spec-sheet figures; the
// model multiplies them by the efficiency factors (achievable fraction of peak).
struct LinkProfile {
  double busbw_bytes_per_s = 0;  // nccl-tests bus bandwidth per GPU
  int64_t latency_ns = 0;        // per collective / per message
};

struct HardwareProfile {
  std::string name;
  std::string source;          // file it came from ("profiles/hardware/h200.yaml (embedded)")
  int gpus_per_node = 1;       // scope of the intra-node link (NVLink domain)
  double memory_bytes = 0;     // per GPU
  double hbm_bytes_per_s = 0;  // per GPU
  double peak_bf16_flops = 0;  // dense, per GPU
  double peak_fp8_flops = 0;   // dense, per GPU
  double peak_fp4_flops = 0;   // dense, per GPU; 0 = no FP4 units (FP8 rate is used)
  double host_link_bytes_per_s = 0;
  // The datasheet's maximum board power (TDP), per GPU; 0 = not known. `plan` prices energy at
  // it, an upper bound (no power model yet).
  double max_power_w = 0;
  LinkProfile intra_node;
  LinkProfile inter_node;
  double flops_efficiency = 0.6;
  double hbm_efficiency = 0.85;
  double intra_node_efficiency = 0.8;
  double inter_node_efficiency = 0.8;
};

enum class AttentionKind { kGqa, kMla };

struct ModelProfile {
  std::string name;
  std::string source;
  int layers = 0;
  int hidden_size = 0;
  int intermediate_size = 0;  // dense MLP layers
  int vocab_size = 0;
  bool tie_word_embeddings = false;

  AttentionKind attention = AttentionKind::kGqa;
  int heads = 0;
  int kv_heads = 0;  // GQA
  int head_dim = 0;  // GQA
  // MLA (DeepSeek-V2/V3): the cache holds kv_lora_rank + qk_rope_head_dim values per layer.
  int q_lora_rank = 0;  // 0 = no query compression
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  // Sliding-window layers: sliding_layers of the layers attend to the last sliding_window_tok
  // tokens only (0 = none).
  int sliding_window_tok = 0;
  int sliding_layers = 0;
  // Sparse attention (DeepSeek's DSA, V4's compressed sparse attention): sparse_layers of the
  // layers attend to the sparse_top_k tokens an indexer picks; the indexer scores every cached
  // token with indexer_heads x indexer_head_dim (its keys cached at 1 byte per element).
  int sparse_layers = 0;
  int sparse_top_k = 0;
  int indexer_heads = 0;
  int indexer_head_dim = 0;

  // MoE (experts == 0: dense). The first dense_layers layers use the dense MLP.
  int experts = 0;
  int active_experts = 0;
  int shared_experts = 0;
  int expert_intermediate_size = 0;
  int dense_layers = 0;

  // Published parameter counts, when the architecture above does not describe every weight
  // (0 = derived from the architecture).
  double params_total_override = 0;
  double params_active_override = 0;

  std::string native_precision = "bf16";  // the checkpoint's weight precision
  // Bytes per weight by precision name; bf16 = 2, fp8 = 1, fp4 = 0.5 unless the file says more.
  std::map<std::string, double> weight_bytes_per_param;

  // KV cache given explicitly (bytes per token for all layers, at kv_dtype) instead of derived.
  double kv_bytes_per_token_override = 0;
  std::string kv_dtype = "bf16";  // the dtype of the override, or the default KV dtype
  double prefill_overhead = 0;    // extra fraction of prefill compute (state rebuilt by replay)
};

// Parameter counts derived from a model profile (overrides applied).
struct ModelParams {
  double total = 0;              // every weight, embeddings included
  double active = 0;             // weights used per token (shared + routed top-k + dense)
  double routed_total = 0;       // all routed experts (0 for dense models)
  double embedding = 0;          // input embedding table (vocab x hidden)
  double lm_head = 0;            // output projection (0 when tied to the embedding)
  double output_projection = 0;  // vocab x hidden, read every step (the embedding when tied)
  double attention_per_layer = 0;
  double expert_each = 0;  // one routed expert of one layer
  int moe_layers = 0;
};

ModelParams ComputeParams(const ModelProfile& model);

// Bytes per token of KV cache for all layers at `kv_dtype` ("bf16", "fp16", "fp8", "fp4",
// or "auto" = the model's kv_dtype). Fails on an unknown dtype, or when the model gives its KV
// size explicitly for another dtype.
Status KvBytesPerToken(const ModelProfile& model, const std::string& kv_dtype, double* out);

// Bytes per weight at `precision` ("" or "native" = the model's native precision).
Status WeightBytesPerParam(const ModelProfile& model, const std::string& precision, double* out);

// Parse a profile from YAML text; `origin` names the file in error messages.
Status ParseHardwareProfile(std::string_view yaml, const std::string& origin, HardwareProfile* out);
Status ParseModelProfile(std::string_view yaml, const std::string& origin, ModelProfile* out);

// "moe" or "dense": the kind an engine profile's coefficients are for (EngineProfile).
inline const char* ModelArchitecture(const ModelProfile& model) {
  return model.experts > 0 ? "moe" : "dense";
}

// A shipped name ("h200") or a path to a YAML file.
// Whether a profile name is a path to a YAML file (it has a '/' or ends in .yaml / .yml) rather
// than the name of a shipped profile; a matrix resolves such paths against its own folder.
bool IsProfilePath(const std::string& name_or_path);

Status LoadHardwareProfile(const std::string& name_or_path, HardwareProfile* out);
Status LoadModelProfile(const std::string& name_or_path, ModelProfile* out);

// The shipped model profile whose name appears in a served model's name, case-insensitive
// ("meta-llama/Llama-3.1-70B-Instruct" -> "llama-3.1-70b"; the longest match wins), or an error
// that lists the shipped names.
Status InferModelProfileName(const std::string& served_model, std::string* profile);

// The names of the shipped profiles, sorted.
std::vector<std::string> ShippedHardwareProfiles();
std::vector<std::string> ShippedModelProfiles();

// Figures measured by `servesweep probe` (docs/probes.md); 0 = not measured.
struct ProbeFigures {
  double hbm_bytes_per_s = 0;         // HBM copy (or triad) bandwidth
  double bf16_flops = 0;              // dense bf16 GEMM
  double fp8_flops = 0;               // dense fp8 GEMM
  double host_link_bytes_per_s = 0;   // pinned host<->device
  double nccl_busbw_bytes_per_s = 0;  // all-reduce bus bandwidth among the node's GPUs
};

// `base` with every measured figure replaced and its efficiency set to 1.0 (a measured figure is
// already achieved); unmeasured figures keep the base's value and efficiency. The name becomes
// base.name + "-measured".
HardwareProfile HardwareFromProbes(const HardwareProfile& base, const ProbeFigures& probes);

// Where the embedded profiles live ("profiles/hardware/<name>.yaml"); for the embedding.
std::string_view EmbeddedProfile(std::string_view path);
std::vector<std::string_view> EmbeddedProfilePaths();

}  // namespace servesweep::perfmodel
