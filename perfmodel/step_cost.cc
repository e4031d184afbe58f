#include "perfmodel/step_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace servesweep::perfmodel {
namespace {

bool StartsWith(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The tensor-core rate a weight precision computes at.
double PeakFlops(const HardwareProfile& hw, const std::string& precision) {
  if (StartsWith(precision, "fp8")) return hw.peak_fp8_flops;
  if (StartsWith(precision, "fp4") || StartsWith(precision, "nvfp4") ||
      StartsWith(precision, "mxfp4") || StartsWith(precision, "int4")) {
    return hw.peak_fp4_flops > 0 ? hw.peak_fp4_flops : hw.peak_fp8_flops;
  }
  return hw.peak_bf16_flops;
}

const LinkProfile& LinkFor(const HardwareProfile& hw, int gpus, double* efficiency) {
  const bool intra = gpus <= hw.gpus_per_node;
  *efficiency = intra ? hw.intra_node_efficiency : hw.inter_node_efficiency;
  return intra ? hw.intra_node : hw.inter_node;
}

// One adapter's weights: each adapted linear layer W (d_in x d_out) gains A (d_in x r) and B
// (r x d_out), r (d_in + d_out) weights; a merged projection (qkv, gate_up) has one A and B per
// slice, as vLLM's punica layers. Adapted: the attention projections of every layer (GQA: q, k, v,
// o; MLA approximated as four h x heads*v_head_dim projections) and the dense MLPs (gate, up,
// down; routed experts are not adapted).
double LoraParams(const ModelProfile& m, int moe_layers, int rank) {
  if (rank == 0) return 0;
  const double h = m.hidden_size;
  double attention = 0;
  if (m.attention == AttentionKind::kGqa) {
    const double q = static_cast<double>(m.heads) * m.head_dim;
    const double kv = static_cast<double>(m.kv_heads) * m.head_dim;
    attention = (3 * h + q + 2 * kv) + (q + h);
  } else {
    attention = 4 * (h + static_cast<double>(m.heads) * m.v_head_dim);
  }
  const double mlp = 3 * h + 3.0 * m.intermediate_size;
  return rank * (m.layers * attention + (m.layers - moe_layers) * mlp);
}

}  // namespace

Status CostModel::Create(const HardwareProfile& hw, const ModelProfile& model,
                         const DeploymentConfig& d, CostModel* out) {
  const int replicas = d.prefill_instances > 0 && d.decode_instances > 0
                           ? std::min(d.prefill_instances, d.decode_instances)
                           : d.dp;
  if (d.tp < 1 || d.pp < 1 || d.dp < 1 || d.ep < 1) {
    return Status::InvalidArgument(fmt::format(
        "deployment: expected tp, pp, dp, ep >= 1, found {}/{}/{}/{}", d.tp, d.pp, d.dp, d.ep));
  }
  if (d.dp_attention < 1 || d.tp % d.dp_attention != 0) {
    return Status::InvalidArgument(fmt::format(
        "deployment: expected dp_attention groups dividing tp={}, found {}", d.tp, d.dp_attention));
  }
  if ((d.prefill_instances > 0) != (d.decode_instances > 0) || d.prefill_instances < 0) {
    return Status::InvalidArgument(fmt::format(
        "deployment: expected prefill_instances and decode_instances both 0 or both > 0, found "
        "{} and {}",
        d.prefill_instances, d.decode_instances));
  }
  if (d.pp > model.layers) {
    return Status::InvalidArgument(fmt::format(
        "deployment: expected pp <= the model's {} layers, found {}", model.layers, d.pp));
  }
  if (d.ep > 1 && (model.experts == 0 || d.ep % d.tp != 0 || (d.tp * replicas) % d.ep != 0)) {
    return Status::InvalidArgument(fmt::format(
        "deployment: expected ep = 1, or (for an MoE model) a multiple of tp={} dividing tp x "
        "replicas={}, found ep={} for {} model {}",
        d.tp, d.tp * replicas, d.ep, model.experts > 0 ? "MoE" : "dense", model.name));
  }
  if (d.max_num_seqs < 1 || d.max_num_batched_tokens < 1 || d.block_size_tok < 1 ||
      d.decode_steps < 1 || d.prefill_chunk_tok < 0) {
    return Status::InvalidArgument(
        fmt::format("deployment: expected max_num_seqs, max_num_batched_tokens, block_size_tok and "
                    "decode_steps >= 1 and prefill_chunk_tok >= 0, found {}, {}, {}, {}, {}",
                    d.max_num_seqs, d.max_num_batched_tokens, d.block_size_tok, d.decode_steps,
                    d.prefill_chunk_tok));
  }
  if (!(d.gpu_memory_utilization > 0 && d.gpu_memory_utilization <= 1)) {
    return Status::InvalidArgument(
        fmt::format("deployment: expected gpu_memory_utilization in (0, 1], found {}",
                    d.gpu_memory_utilization));
  }
  if (d.spec_num_tok < 0 || d.spec_mean_accepted_tok < 0 ||
      d.spec_mean_accepted_tok > d.spec_num_tok) {
    return Status::InvalidArgument(fmt::format(
        "deployment: expected 0 <= spec_mean_accepted_tok <= spec_num_tok, found {} and {}",
        d.spec_mean_accepted_tok, d.spec_num_tok));
  }

  CostModel c;
  c.hw_ = hw;
  c.model_ = model;
  c.deployment_ = d;
  c.params_ = ComputeParams(model);
  if (Status s = WeightBytesPerParam(model, d.precision, &c.bytes_per_param_); !s.ok()) return s;
  if (Status s = KvBytesPerToken(model, d.kv_dtype, &c.kv_bytes_per_token_); !s.ok()) return s;
  const std::string precision =
      d.precision.empty() || d.precision == "native" ? model.native_precision : d.precision;
  c.achievable_flops_ = PeakFlops(hw, precision) * hw.flops_efficiency;
  c.achievable_hbm_ = hw.hbm_bytes_per_s * hw.hbm_efficiency;

  const int gpus = d.tp * d.pp;
  const int attention_tp = d.tp / d.dp_attention;  // GPUs that share one request's attention
  const int expert_div = d.ep > 1 ? d.ep * d.pp : gpus;
  c.attention_params_ = c.params_.attention_per_layer * model.layers;
  const double non_routed = c.params_.total - c.params_.routed_total;
  // Attention weights are replicated over the DP-attention groups; the rest is split over tp.
  c.weight_bytes_per_gpu_ = c.attention_params_ * c.bytes_per_param_ / (attention_tp * d.pp) +
                            (non_routed - c.attention_params_) * c.bytes_per_param_ / gpus +
                            c.params_.routed_total * c.bytes_per_param_ / expert_div;
  // GQA KV heads split over the TP ranks of a request's attention (replicated when there are
  // more ranks than KV heads); an MLA latent or an explicit KV size is replicated on each. With
  // DP attention a token's KV lives in its own group only. Pipeline stages hold their layers'.
  const int kv_shard =
      model.attention == AttentionKind::kGqa && model.kv_bytes_per_token_override == 0
          ? std::min(attention_tp, model.kv_heads)
          : 1;
  c.kv_bytes_per_gpu_tok_ = c.kv_bytes_per_token_ / d.pp / kv_shard;
  c.kv_layer_bytes_ = c.kv_bytes_per_token_ / model.layers / kv_shard;
  const double usable = hw.memory_bytes * d.gpu_memory_utilization - d.activation_reserve_bytes;
  const double kv_room = usable - c.weight_bytes_per_gpu_;
  if (kv_room < c.kv_bytes_per_gpu_tok_ * d.block_size_tok) {
    return Status::InvalidArgument(fmt::format(
        "deployment: {} at {} needs {:.1f} GB of weights per GPU over tp={} pp={} ep={}, but {} "
        "has {:.1f} GB usable per GPU (memory x gpu_memory_utilization {} - activation reserve), "
        "leaving no room for the KV cache",
        model.name, precision, c.weight_bytes_per_gpu_ / 1e9, d.tp, d.pp, d.ep, hw.name,
        usable / 1e9, d.gpu_memory_utilization));
  }
  // Where the engine pools sliding-window KV apart, a token of capacity costs the full layers'
  // KV and sliding_kv_ratio of the sliding layers' (a GQA model without an explicit KV size).
  double capacity_bytes_per_gpu_tok = c.kv_bytes_per_gpu_tok_;
  if (model.sliding_layers > 0 && model.attention == AttentionKind::kGqa &&
      model.kv_bytes_per_token_override == 0) {
    capacity_bytes_per_gpu_tok *=
        (model.layers - model.sliding_layers * (1 - d.sliding_kv_ratio)) / model.layers;
  }
  c.kv_capacity_tok_ =
      static_cast<int64_t>(kv_room / capacity_bytes_per_gpu_tok) * d.dp_attention;
  if (d.kv_capacity_limit_tok > 0) {
    c.kv_capacity_tok_ = std::min(c.kv_capacity_tok_, d.kv_capacity_limit_tok);
  }

  // Attention FLOPs per (query, key) pair and layer. MLA prefills in its decompressed form and
  // decodes in its absorbed form (queries projected into the latent: scores over r_kv + rope,
  // values over r_kv), as FlashMLA does.
  if (model.attention == AttentionKind::kGqa) {
    c.prefill_pair_flops_ = c.decode_pair_flops_ = 4.0 * model.heads * model.head_dim;
  } else {
    c.prefill_pair_flops_ =
        2.0 * model.heads * (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim);
    c.decode_pair_flops_ = 2.0 * model.heads * (2.0 * model.kv_lora_rank + model.qk_rope_head_dim);
  }
  const EngineCoefficients& e = d.engine.coefficients;
  auto kind_efficiency = [&](const char* kind) {
    auto it = e.attention_efficiency.find(kind);
    return it == e.attention_efficiency.end() ? 1.0 : it->second;
  };
  c.attention_efficiency_ = kind_efficiency(model.attention == AttentionKind::kMla ? "mla" : "gqa");
  c.sparse_efficiency_ = kind_efficiency("sparse");
  // Attention runs at the KV cache's precision (FP8 attention with an FP8 cache), else bf16.
  const std::string kv_dtype =
      d.kv_dtype.empty() || d.kv_dtype == "auto" ? model.kv_dtype : d.kv_dtype;
  c.attention_flops_ = PeakFlops(hw, kv_dtype) * hw.flops_efficiency;
  c.dense_params_ =
      std::max(0.0, non_routed - c.attention_params_ - c.params_.embedding - c.params_.lm_head);
  if (d.lora_rank < 0 || (d.lora_rank > 0 && d.max_loras < 1)) {
    return Status::InvalidArgument(fmt::format(
        "deployment: expected lora_rank >= 0 and max_loras >= 1 with LoRA, found {} and {}",
        d.lora_rank, d.max_loras));
  }
  c.lora_params_ = LoraParams(model, c.params_.moe_layers, d.lora_rank);
  *out = std::move(c);
  return Status::Ok();
}

double CostModel::AllReduceNs(double bytes, int ranks, const LinkProfile& link,
                              double efficiency) const {
  if (ranks <= 1) return 0;
  return bytes * 2.0 * (ranks - 1) / ranks / (link.busbw_bytes_per_s * efficiency) * 1e9 +
         static_cast<double>(link.latency_ns);
}

double CostModel::AllToAllNs(double bytes, int ranks, const LinkProfile& link,
                             double efficiency) const {
  if (ranks <= 1) return 0;
  return bytes * (ranks - 1) / ranks / (link.busbw_bytes_per_s * efficiency) * 1e9 +
         static_cast<double>(link.latency_ns);
}

double CostModel::DistinctExperts(double tokens) const {
  if (model_.experts == 0) return 0;
  const double e = model_.experts;
  const double miss = std::pow(1.0 - model_.active_experts / e, tokens);
  return e * (1.0 - miss);
}

namespace {

// Sum over a chunk's queries j = 1..n of min(c + j, window): the keys each one attends to.
double PairsWithin(double c, double n, double window) {
  if (window <= 0 || c + n <= window) return n * c + n * (n + 1) / 2;
  if (c >= window) return n * window;
  const double below = window - c;  // queries that still see their whole context
  return below * c + below * (below + 1) / 2 + (n - below) * window;
}

// efficiency x t / (t + half): GEMMs at t rows (tokens) per weight matrix.
double ShapeEfficiency(double efficiency, double t, double half) {
  return half > 0 ? efficiency * t / (t + half) : efficiency;
}

}  // namespace

StepCost CostModel::Step(const std::vector<BatchEntry>& batch) const {
  const DeploymentConfig& d = deployment_;
  const EngineCoefficients& e = d.engine.coefficients;
  const double h = model_.hidden_size;
  const int L = model_.layers;
  const int full_layers = L - model_.sliding_layers - model_.sparse_layers;
  double tokens = 0, sampled = 0, kv_read_tok = 0, indexer_read_tok = 0, lora_tok = 0;
  std::vector<int32_t> adapters;  // the step's distinct LoRA adapters
  double attention_flops = 0, sparse_flops = 0, sparse_read_tok = 0;
  bool prefill = false;
  for (const BatchEntry& b : batch) {
    const double n = b.new_tok, c = static_cast<double>(b.context_tok);
    const bool chunk = b.sampled_tok < b.new_tok;  // a prefill chunk (decodes sample every token)
    prefill = prefill || chunk;
    const double pair_flops = chunk ? prefill_pair_flops_ : decode_pair_flops_;
    const double overhead = chunk ? 1 + model_.prefill_overhead : 1;
    attention_flops += overhead * pair_flops *
                       (full_layers * PairsWithin(c, n, 0) +
                        model_.sliding_layers * PairsWithin(c, n, model_.sliding_window_tok));
    kv_read_tok +=
        full_layers * (c + n) +
        model_.sliding_layers * std::min(c + n, static_cast<double>(model_.sliding_window_tok));
    if (model_.sparse_layers > 0) {
      const double k = model_.sparse_top_k;
      sparse_flops += overhead * model_.sparse_layers *
                      (pair_flops * PairsWithin(c, n, k) +
                       2.0 * model_.indexer_heads * model_.indexer_head_dim * PairsWithin(c, n, 0));
      sparse_read_tok += model_.sparse_layers * std::min(c + n, k * n);
      indexer_read_tok += model_.sparse_layers * (c + n);
    }
    tokens += n;
    sampled += b.sampled_tok;
    if (b.adapter >= 0 && lora_params_ > 0) {
      lora_tok += n;
      if (std::find(adapters.begin(), adapters.end(), b.adapter) == adapters.end()) {
        adapters.push_back(b.adapter);
      }
    }
  }

  StepCost cost;
  const int gpus = d.tp * d.pp;
  const int m = d.pp > 1 ? std::clamp(d.pp_microbatches > 0 ? d.pp_microbatches : d.pp, 1,
                                      std::max<int>(1, static_cast<int>(batch.size())))
                         : 1;
  cost.microbatches = m;
  const double mb_tokens = tokens / m;
  cost.cuda_graphs = e.cuda_graph_max_tok > 0 && tokens <= e.cuda_graph_max_tok &&
                     (!prefill || e.graph_mixed_batches);

  // Dense GEMMs (attention projections, dense MLPs, shared experts, router) and the output
  // projection: FLOPs over the tokens (logits for the sampled positions only), weights read once
  // per micro-batch; attention weights are replicated over DP-attention groups.
  const int attention_tp = d.tp / d.dp_attention;
  const double dense_flops =
      2 * (attention_params_ + dense_params_) * tokens + 2 * params_.output_projection * sampled;
  const double dense_bytes = (attention_params_ / (attention_tp * d.pp) +
                              (dense_params_ + params_.output_projection) / gpus) *
                             bytes_per_param_;
  const double gemm_eff = ShapeEfficiency(e.gemm_efficiency, mb_tokens, e.gemm_half_tok);
  const double dense_compute = dense_flops / gpus / m / (achievable_flops_ * gemm_eff) * 1e9;
  const double dense_memory = dense_bytes / (achievable_hbm_ * e.weight_read_efficiency) * 1e9;

  // Routed experts: only those the micro-batch's tokens hit are read (over the EP group's
  // tokens when ep > 1); their GEMMs run at the efficiency of their tokens per expert, counted
  // over the experts hit (a lone decode token gives each of its k experts one token, not k/E:
  // the experts no token reaches cost nothing).
  double expert_compute = 0, expert_memory = 0, expert_bytes = 0;
  if (model_.experts > 0) {
    const int expert_div = d.ep > 1 ? d.ep * d.pp : gpus;
    const double group_tokens = mb_tokens * (d.ep > 1 ? static_cast<double>(d.ep) / d.tp : 1.0);
    const double hit = DistinctExperts(group_tokens);
    expert_bytes = params_.routed_total * hit / model_.experts * bytes_per_param_ / expert_div;
    const double per_expert = hit > 0 ? group_tokens * model_.active_experts / hit : 0;
    const double expert_eff =
        ShapeEfficiency(e.expert_gemm_efficiency, per_expert, e.expert_half_tok);
    const double flops =
        2.0 * params_.moe_layers * model_.active_experts * params_.expert_each * tokens;
    expert_compute = flops / gpus / m / (achievable_flops_ * expert_eff) * 1e9;
    expert_memory = expert_bytes / (achievable_hbm_ * e.expert_read_efficiency) * 1e9;
  }

  // Attention by kind: FLOPs over the (query, key) pairs each layer attends to, the KV read
  // (a DP-attention group reads its own requests' KV), and the sparse indexer's keys.
  const double kv_share = 1.0 / (d.pp * d.dp_attention);
  const double kv_bytes = kv_read_tok * kv_layer_bytes_ * kv_share;
  const double attention_compute =
      attention_flops / gpus / m / (attention_flops_ * attention_efficiency_) * 1e9;
  const double attention_memory = kv_bytes / m / (achievable_hbm_ * attention_efficiency_) * 1e9;
  const double sparse_bytes =
      (sparse_read_tok * kv_layer_bytes_ + indexer_read_tok * model_.indexer_head_dim) * kv_share;
  const double sparse_compute =
      sparse_flops / gpus / m / (attention_flops_ * sparse_efficiency_) * 1e9;
  const double sparse_memory = sparse_bytes / m / (achievable_hbm_ * sparse_efficiency_) * 1e9;

  // LoRA (punica's shrink and expand): every adapted token through its adapter's A and B, and
  // each distinct adapter's weights (bf16, TP-sharded) read once per micro-batch.
  const double lora_flops = 2 * lora_params_ * lora_tok;
  const double lora_bytes = static_cast<double>(adapters.size()) * lora_params_ * 2 / gpus;
  const double lora_compute = lora_flops / gpus / m / (achievable_flops_ * gemm_eff) * 1e9;
  const double lora_memory = lora_bytes / (achievable_hbm_ * e.weight_read_efficiency) * 1e9;

  const double work = std::max(dense_compute, dense_memory) +
                      std::max(expert_compute, expert_memory) +
                      std::max(attention_compute, attention_memory) +
                      std::max(sparse_compute, sparse_memory) + std::max(lora_compute, lora_memory);
  cost.flops = dense_flops + attention_flops + sparse_flops + lora_flops +
               (model_.experts > 0 ? 2.0 * params_.moe_layers * model_.active_experts *
                                         params_.expert_each * tokens
                                   : 0.0);
  cost.weight_bytes = (dense_bytes + expert_bytes) * m;
  cost.kv_bytes = kv_bytes + sparse_bytes;
  cost.lora_bytes = lora_bytes * m;
  cost.compute_ns =
      (dense_compute + expert_compute + attention_compute + sparse_compute + lora_compute) * m;
  cost.memory_ns =
      (dense_memory + expert_memory + attention_memory + sparse_memory + lora_memory) * m;

  // Per-layer floor: small kernels and gaps on the GPU; without CUDA graphs the GPU also waits
  // for the CPU to launch each layer's kernels.
  const double layers_per_stage = static_cast<double>(L) / d.pp;
  const double layer_floor_us =
      e.layer_gpu_us + (model_.attention == AttentionKind::kMla ? e.mla_layer_gpu_us : 0);
  const double small_kernels = layers_per_stage * layer_floor_us * 1e3;
  const double launch = cost.cuda_graphs ? 0 : layers_per_stage * e.layer_launch_us * 1e3;

  // Collectives, latency-bound at small messages: two per layer at TP > 1 (all-reduce; with DP
  // attention the gather before and the scatter after the MLP), two per MoE layer with EP.
  const double moe_layers_per_stage = static_cast<double>(params_.moe_layers) / d.pp;
  double comm_mb = 0, eff = 1;
  if (d.tp > 1) {
    const LinkProfile& link = LinkFor(hw_, d.tp, &eff);
    comm_mb +=
        layers_per_stage * 2 *
        (AllReduceNs(mb_tokens * h * d.activation_bytes, d.tp, link, eff) + e.allreduce_us * 1e3);
  }
  if (d.ep > 1) {
    const LinkProfile& link = LinkFor(hw_, d.ep, &eff);
    const double bytes = mb_tokens / d.tp * model_.active_experts * h * d.activation_bytes;
    comm_mb +=
        moe_layers_per_stage * 2 * (AllToAllNs(bytes, d.ep, link, eff) + e.all_to_all_us * 1e3);
  }
  double send_recv = 0;
  if (d.pp > 1) {
    const LinkProfile& link = LinkFor(hw_, gpus, &eff);
    send_recv = mb_tokens * h * d.activation_bytes / (link.busbw_bytes_per_s * eff) * 1e9 +
                static_cast<double>(link.latency_ns);
  }
  const double stage = std::max(work + small_kernels, launch) + comm_mb;
  const double slots = m + d.pp - 1;  // the pipeline bubble: pp - 1 idle slots per step
  cost.comm_ns = slots * (comm_mb + send_recv);
  cost.floor_ns = slots * (std::max(work + small_kernels, launch) - work);
  cost.gpu_ns = slots * (stage + send_recv);
  // The engine's CPU: per step, per request in the batch, per token scheduled; the part that
  // overlaps runs while the GPU computes.
  cost.cpu_ns =
      (e.step_cpu_us + e.seq_cpu_us * static_cast<double>(batch.size()) + e.tok_cpu_us * tokens) *
      1e3;
  cost.total_ns = TotalNs(cost.gpu_ns, cost.cpu_ns);
  return cost;
}

int64_t CostModel::TotalNs(double gpu_ns, double cpu_ns) const {
  const double overlap = deployment_.engine.coefficients.cpu_overlap;
  return static_cast<int64_t>(std::llround(gpu_ns + cpu_ns - overlap * std::min(gpu_ns, cpu_ns)));
}

int64_t CostModel::KvTransferNs(int64_t tokens) const {
  const bool inter = deployment_.pd_transfer_inter_node;
  const LinkProfile& link = inter ? hw_.inter_node : hw_.intra_node;
  const double eff = inter ? hw_.inter_node_efficiency : hw_.intra_node_efficiency;
  // Every GPU of the prefill instance sends its own shard over its own link.
  const double lanes = kv_bytes_per_token_ / kv_bytes_per_gpu_tok_;
  const double bytes = static_cast<double>(tokens) * kv_bytes_per_token_;
  return static_cast<int64_t>(std::llround(bytes / (lanes * link.busbw_bytes_per_s * eff) * 1e9)) +
         link.latency_ns;
}

int64_t CostModel::LoraLoadNs() const {
  if (lora_params_ == 0) return 0;
  const double bw = hw_.host_link_bytes_per_s > 0 ? hw_.host_link_bytes_per_s
                                                  : WeightLoadBytesPerS();
  return static_cast<int64_t>(std::llround(lora_params_ * 2 / gpus_per_replica() / bw * 1e9));
}

double CostModel::WeightLoadBytesPerS() const {
  const double bw = deployment_.engine.coefficients.weight_load_gb_per_s * 1e9;
  return hw_.host_link_bytes_per_s > 0 ? std::min(bw, hw_.host_link_bytes_per_s) : bw;
}

int64_t CostModel::ColdStartNs() const {
  const EngineCoefficients& c = deployment_.engine.coefficients;
  const double graphs_s = c.cuda_graph_max_tok > 0 ? c.graph_capture_s : 0;
  return static_cast<int64_t>(
      std::llround((c.startup_init_s + weight_bytes_per_gpu_ / WeightLoadBytesPerS() + graphs_s) *
                   1e9));
}

}  // namespace servesweep::perfmodel
