// How a model is deployed: the parallel layout, the engine (its profile: coefficients and
// defaults, perfmodel/engine_profile.h) and its scheduler settings. A plain struct with
// unit-suffixed names. The scheduler defaults below are vLLM's (max_num_seqs 256,
// max_num_batched_tokens 8192 with chunked prefill, gpu_memory_utilization 0.9, prefix caching
// on, recompute preemption); DeploymentFor (run_deployment.h) takes them from the run's engine
// profile instead, unless the run's engine_config sets them.
//
// Thread-safety: a value.
#pragma once

#include <cstdint>
#include <string>

#include "perfmodel/engine_profile.h"

namespace servesweep::perfmodel {

struct DeploymentConfig {
  // Parallel layout. One engine instance (replica) spans tp x pp GPUs.
  int tp = 1;  // tensor parallel: weights, FLOPs and KV heads split; two all-reduces per layer
  int pp = 1;  // pipeline parallel: layers split into stages; micro-batches fill the pipeline
  int dp = 1;  // independent replicas; each request goes to the least-loaded one
  // API-server processes in front of the replicas (vLLM --api-server-count), requests dealt
  // round-robin by id; each has the engine's api_request_us / api_token_us ceilings.
  int api_servers = 1;
  // Expert parallel (MoE only): routed experts spread over ep GPUs instead of TP-sliced, with an
  // all-to-all dispatch and combine per MoE layer. 1 = off; otherwise a multiple of tp that
  // divides tp x dp (the EP group spans ep / tp replicas, as vLLM's --enable-expert-parallel).
  int ep = 1;
  // Data-parallel attention (SGLang --enable-dp-attention): this many attention groups inside
  // each instance share its tp GPUs (attention weights replicated per group, each group its own
  // requests and their KV); the MLP/MoE layers stay TP/EP over the instance. 1 = off.
  int dp_attention = 1;
  // Prefill/decode disaggregation: both > 0 = separate pools of instances of the layout above
  // (dp is then ignored); the KV cache moves from prefill to decode after the first token.
  int prefill_instances = 0;
  int decode_instances = 0;
  bool pd_transfer_inter_node = true;  // KV moves over the inter-node link (else intra-node)

  std::string precision = "native";  // weights: a key of the model's weight_bytes_per_param
  std::string kv_dtype = "auto";     // bf16, fp16, fp8, fp4, auto (= the model's)

  // Scheduler (vLLM V1): per step, at most max_num_batched_tokens tokens (decodes first, then
  // prefill chunks of at most prefill_chunk_tok) and at most max_num_seqs running requests.
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  // Chunked prefill: a prompt may be split over steps, in chunks of at most prefill_chunk_tok
  // (0 = the step's budget; SGLang's --chunked-prefill-size). false: a prompt is prefilled whole
  // in one step (the budget grows to hold it).
  bool chunked_prefill = true;
  int prefill_chunk_tok = 0;
  // Prefill chunks share steps with decodes; false: a step is all prefill or all decode, with
  // waiting prompts first (vLLM V0 without chunked prefill).
  bool mixed_batches = true;
  // Decode steps run per schedule (vLLM 0.6 --num-scheduler-steps): a decode-only batch runs
  // this many steps back to back, its tokens delivered at the end, new requests admitted after.
  int decode_steps = 1;
  double sliding_kv_ratio = 1;  // EngineDefaults::sliding_kv_ratio
  double gpu_memory_utilization = 0.9;
  double activation_reserve_bytes = 1e9;  // per GPU, held back from the KV cache
  int64_t kv_capacity_limit_tok = 0;      // > 0: at most this many KV tokens per instance (-c)

  // Prefix cache: LRU over blocks of block_size_tok tokens keyed by the caller's block hashes.
  bool prefix_caching = true;
  int block_size_tok = 512;

  // Speculative decoding: spec_num_tok draft tokens verified per decode step, of which
  // spec_mean_accepted_tok are accepted on average (each step emits 1 + accepted tokens).
  int spec_num_tok = 0;
  double spec_mean_accepted_tok = 0;

  // Multi-LoRA (vLLM --enable-lora, docs/perfmodel.md#multi-lora): adapters of lora_rank on the
  // attention projections and dense MLPs (GPU buffers at the engine's max rank), at most
  // max_loras of them in one step (the GPU slots, least recently used evicted); a request whose
  // adapter is not in a slot waits while the slots hold adapters of running requests, and
  // loading one copies it from host memory over the host link. lora_rank 0 = no LoRA.
  int lora_rank = 0;
  int max_loras = 1;

  int pp_microbatches = 0;      // micro-batches per step with pp > 1 (0 = pp)
  double activation_bytes = 2;  // bytes per element in collectives (bf16)

  // The engine's coefficients (kernel efficiencies, latency floors, CPU per step). Default: the
  // bare roofline, which only tests want; DeploymentFor loads the run's engine profile.
  EngineProfile engine;
};

}  // namespace servesweep::perfmodel
