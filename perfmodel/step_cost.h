// The analytic cost of one engine step, and the sizes derived from a deployment: weights and KV
// capacity per GPU, KV transfer and cold-start times. A step is a roofline per kernel class
// (dense GEMMs, expert GEMMs, attention by kind, the output projection) at efficiencies that
// depend on its shape (tokens per step, tokens per expert), plus a per-layer floor (with or
// without CUDA graphs), the collectives (TP all-reduce, DP-attention gather/scatter, EP
// dispatch/combine, PP hops, latency-bound when small), and the engine's CPU time, which grows
// with the batch and may overlap the GPU's. Every coefficient comes from the hardware, model and
// engine profiles; docs/perfmodel.md gives the equations.
//
//   CostModel cost;
//   Status s = CostModel::Create(gpu, model, deployment, &cost);
//   StepCost c = cost.Step({{.context_tok = 1000, .new_tok = 1, .sampled_tok = 1}});
//
// Thread-safety: immutable after Create; const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "perfmodel/deployment.h"
#include "perfmodel/profiles.h"

namespace servesweep::perfmodel {

// One request's share of a step.
struct BatchEntry {
  int64_t context_tok = 0;  // tokens already in its KV cache before this step
  int32_t new_tok = 0;      // tokens computed this step (prefill chunk, 1 decode, 1 + drafts)
  int32_t sampled_tok = 0;  // positions whose logits are computed (0 for a mid-prompt chunk)
  int32_t adapter = -1;     // its LoRA adapter (DeploymentConfig::lora_rank > 0); -1 = the base
};

struct StepCost {
  int64_t total_ns = 0;     // what the step takes: GPU and CPU, after their overlap
  double gpu_ns = 0;        // the GPU's part: every pipeline slot of kernels and collectives
  double cpu_ns = 0;        // the engine's CPU time for the step (before overlap)
  double compute_ns = 0;    // per GPU, whole step: FLOPs / achieved FLOP/s, all classes
  double memory_ns = 0;     // per GPU, whole step: bytes / achieved HBM bandwidth, all classes
  double comm_ns = 0;       // collectives (TP all-reduce, EP all-to-all, PP send/recv)
  double floor_ns = 0;      // per-layer floors (small kernels, or the CPU's launches)
  double flops = 0;         // whole replica
  double weight_bytes = 0;  // read per GPU
  double kv_bytes = 0;      // read per GPU
  double lora_bytes = 0;    // LoRA weights read per GPU (every distinct adapter of the step)
  int microbatches = 1;
  bool cuda_graphs = false;  // the step replays a CUDA graph
};

class CostModel {
 public:
  static Status Create(const HardwareProfile& hw, const ModelProfile& model,
                       const DeploymentConfig& deployment, CostModel* out);

  StepCost Step(const std::vector<BatchEntry>& batch) const;
  // A step's duration from its GPU and CPU parts: their sum, less the overlapped CPU time.
  int64_t TotalNs(double gpu_ns, double cpu_ns) const;

  // One LoRA adapter's weights (every layer's A and B at lora_rank) and the time to copy them
  // into a GPU slot from host memory (per GPU: each holds its TP shard, over its own link).
  double lora_params_per_adapter() const { return lora_params_; }
  int64_t LoraLoadNs() const;

  // Time to move `tokens` tokens of KV cache from a prefill to a decode instance.
  int64_t KvTransferNs(int64_t tokens) const;
  // Process start to ready, from the engine profile's startup coefficients.
  int64_t ColdStartNs() const;

  int64_t kv_capacity_tok() const { return kv_capacity_tok_; }  // per replica
  const DeploymentConfig& deployment() const { return deployment_; }
  double kv_bytes_per_token() const { return kv_bytes_per_token_; }  // whole model
  double kv_bytes_per_token_per_gpu() const { return kv_bytes_per_gpu_tok_; }
  double weight_bytes_per_gpu() const { return weight_bytes_per_gpu_; }
  double bytes_per_param() const { return bytes_per_param_; }
  const ModelParams& params() const { return params_; }
  int gpus_per_replica() const { return deployment_.tp * deployment_.pp; }

  // Collective times, as nccl-tests defines bus bandwidth (exposed for tests).
  double AllReduceNs(double bytes, int ranks, const LinkProfile& link, double efficiency) const;
  double AllToAllNs(double bytes, int ranks, const LinkProfile& link, double efficiency) const;
  // Expected distinct experts hit by `tokens` tokens in one layer (uniform routing).
  double DistinctExperts(double tokens) const;

 private:
  // The engine's weight stream at cold start, capped by the host link.
  double WeightLoadBytesPerS() const;
  HardwareProfile hw_;
  ModelProfile model_;
  DeploymentConfig deployment_;
  ModelParams params_;
  double bytes_per_param_ = 2;
  double achievable_flops_ = 0;
  double achievable_hbm_ = 0;
  double kv_bytes_per_token_ = 0;
  double kv_bytes_per_gpu_tok_ = 0;
  double weight_bytes_per_gpu_ = 0;
  int64_t kv_capacity_tok_ = 0;
  double attention_params_ = 0;  // all layers' attention projections
  double dense_params_ =
      0;  // the rest of the non-routed linear weights (MLPs, shared experts, router)
  double prefill_pair_flops_ = 0;  // per (query, key) pair per layer, prefill form
  double decode_pair_flops_ = 0;   // per pair per layer, decode form (MLA: absorbed)
  double kv_layer_bytes_ = 0;      // KV per token per layer per GPU of the token's group
  double attention_flops_ = 0;     // achieved attention FLOP/s (KV dtype's rate)
  double attention_efficiency_ = 1;
  double sparse_efficiency_ = 1;
  double lora_params_ = 0;  // one adapter, whole model
};

}  // namespace servesweep::perfmodel
