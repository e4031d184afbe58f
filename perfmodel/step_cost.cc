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
  if (d.max_num_seqs < 1 || d.max_num_batched_tokens < 1 || d.block_size_tok < 1) {
    return Status::InvalidArgument(fmt::format(
        "deployment: expected max_num_seqs, max_num_batched_tokens and block_size_tok >= 1, "
        "found {}, {}, {}",
        d.max_num_seqs, d.max_num_batched_tokens, d.block_size_tok));
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
  const int expert_div = d.ep > 1 ? d.ep * d.pp : gpus;
  const double non_routed = c.params_.total - c.params_.routed_total;
  c.weight_bytes_per_gpu_ = non_routed * c.bytes_per_param_ / gpus +
                            c.params_.routed_total * c.bytes_per_param_ / expert_div;
  // GQA KV heads split over TP ranks (replicated when tp > kv_heads); an MLA latent or an
  // explicit KV size is replicated on every TP rank. Pipeline stages hold their layers' KV.
  const int kv_shard =
      model.attention == AttentionKind::kGqa && model.kv_bytes_per_token_override == 0
          ? std::min(d.tp, model.kv_heads)
          : 1;
  c.kv_bytes_per_gpu_tok_ = c.kv_bytes_per_token_ / d.pp / kv_shard;
  const double usable = hw.memory_bytes * d.gpu_memory_utilization - d.activation_reserve_bytes;
  const double kv_room = usable - c.weight_bytes_per_gpu_;
  if (kv_room < c.kv_bytes_per_gpu_tok_ * d.block_size_tok) {
    return Status::InvalidArgument(fmt::format(
        "deployment: {} at {} needs {:.1f} GB of weights per GPU over tp={} pp={} ep={}, but {} "
        "has {:.1f} GB usable per GPU (memory x gpu_memory_utilization - activation reserve), "
        "leaving no room for the KV cache",
        model.name, precision, c.weight_bytes_per_gpu_ / 1e9, d.tp, d.pp, d.ep, hw.name,
        usable / 1e9));
  }
  c.kv_capacity_tok_ = static_cast<int64_t>(kv_room / c.kv_bytes_per_gpu_tok_);

  const double pair_per_layer =
      model.attention == AttentionKind::kGqa
          ? 4.0 * model.heads * model.head_dim
          : 2.0 * model.heads *
                (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim);
  c.attn_flops_per_pair_ = pair_per_layer * model.layers;
  c.linear_params_ = std::max(0.0, c.params_.active - c.params_.embedding - c.params_.lm_head);
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

StepCost CostModel::Step(const std::vector<BatchEntry>& batch) const {
  const DeploymentConfig& d = deployment_;
  const double h = model_.hidden_size;
  double tokens = 0, sampled = 0, flops = 0, kv_tok = 0;
  for (const BatchEntry& e : batch) {
    const double n = e.new_tok, c = static_cast<double>(e.context_tok);
    const double pairs = n * c + n * (n + 1) / 2;
    double entry = 2 * linear_params_ * n + attn_flops_per_pair_ * pairs;
    if (e.sampled_tok < e.new_tok) entry *= 1 + model_.prefill_overhead;  // a prefill chunk
    flops += entry;
    tokens += n;
    sampled += e.sampled_tok;
    kv_tok += c + n;
  }
  flops += 2.0 * model_.vocab_size * h * sampled;

  StepCost cost;
  cost.flops = flops;
  const int gpus = d.tp * d.pp;
  const int m = d.pp > 1 ? std::clamp(d.pp_microbatches > 0 ? d.pp_microbatches : d.pp, 1,
                                      std::max<int>(1, static_cast<int>(batch.size())))
                         : 1;
  cost.microbatches = m;
  const double mb_tokens = tokens / m;

  // Weights read once per micro-batch: everything but the input embedding, and of the routed
  // experts only those the micro-batch's tokens hit (over the EP group's tokens when ep > 1).
  const int expert_div = d.ep > 1 ? d.ep * d.pp : gpus;
  const double group_tokens = mb_tokens * (d.ep > 1 ? static_cast<double>(d.ep) / d.tp : 1.0);
  const double expert_fraction =
      model_.experts > 0 ? DistinctExperts(group_tokens) / model_.experts : 0.0;
  const double dense_bytes =
      (params_.total - params_.routed_total - params_.embedding) * bytes_per_param_ / gpus;
  const double expert_bytes =
      params_.routed_total * expert_fraction * bytes_per_param_ / expert_div;
  cost.weight_bytes = (dense_bytes + expert_bytes) * m;
  cost.kv_bytes = kv_tok * kv_bytes_per_gpu_tok_;

  const double compute_mb = flops / gpus / m / achievable_flops_ * 1e9;
  const double memory_mb = (dense_bytes + expert_bytes + cost.kv_bytes / m) / achievable_hbm_ * 1e9;
  cost.compute_ns = compute_mb * m;
  cost.memory_ns = memory_mb * m;

  const double layers_per_stage = static_cast<double>(model_.layers) / d.pp;
  const double moe_layers_per_stage = static_cast<double>(params_.moe_layers) / d.pp;
  double comm_mb = 0, eff = 1;
  if (d.tp > 1) {
    const LinkProfile& link = LinkFor(hw_, d.tp, &eff);
    comm_mb +=
        layers_per_stage * 2 * AllReduceNs(mb_tokens * h * d.activation_bytes, d.tp, link, eff);
  }
  if (d.ep > 1) {
    const LinkProfile& link = LinkFor(hw_, d.ep, &eff);
    const double bytes = mb_tokens / d.tp * model_.active_experts * h * d.activation_bytes;
    comm_mb += moe_layers_per_stage * 2 * AllToAllNs(bytes, d.ep, link, eff);
  }
  double send_recv = 0;
  if (d.pp > 1) {
    const LinkProfile& link = LinkFor(hw_, gpus, &eff);
    send_recv = mb_tokens * h * d.activation_bytes / (link.busbw_bytes_per_s * eff) * 1e9 +
                static_cast<double>(link.latency_ns);
  }
  const double stage = std::max(compute_mb, memory_mb) + comm_mb;
  const double slots = m + d.pp - 1;  // the pipeline bubble: pp - 1 idle slots per step
  cost.comm_ns = slots * (comm_mb + send_recv);
  cost.total_ns =
      static_cast<int64_t>(std::llround(slots * (stage + send_recv))) + d.step_overhead_ns;
  return cost;
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

int64_t CostModel::ColdStartNs() const {
  double bw = deployment_.weight_load_bytes_per_s;
  if (hw_.host_link_bytes_per_s > 0) bw = std::min(bw, hw_.host_link_bytes_per_s);
  return static_cast<int64_t>(std::llround(weight_bytes_per_gpu_ / bw * 1e9)) +
         deployment_.graph_capture_ns;
}

}  // namespace servesweep::perfmodel
