#include "perfmodel/profiles.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "common/file_text.h"
#include "common/yaml_reader.h"

namespace servesweep::perfmodel {
namespace {

constexpr std::string_view kHardwareDir = "profiles/hardware/";
constexpr std::string_view kModelDir = "profiles/models/";

void ReadLink(YamlMap r, LinkProfile* link) {
  double gb_per_s = 0, latency_us = 0;
  r.ReadNumber("busbw_gb_per_s", &gb_per_s, 0, YamlMap::kRequired);
  r.ReadNumber("latency_us", &latency_us, 0, YamlMap::kRequired);
  r.Finish();
  link->busbw_bytes_per_s = gb_per_s * 1e9;
  link->latency_ns = static_cast<int64_t>(std::llround(latency_us * 1e3));
}

double DtypeBytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16" || dtype == "auto") return 2;
  if (dtype == "fp8" || dtype == "fp8_e4m3" || dtype == "fp8_e5m2") return 1;
  if (dtype == "fp4" || dtype == "nvfp4" || dtype == "mxfp4") return 0.5;
  return 0;
}

}  // namespace

bool IsProfilePath(const std::string& s) {
  auto ends_with = [&](std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return s.find('/') != std::string::npos || ends_with(".yaml") || ends_with(".yml");
}

namespace {

std::vector<std::string> ShippedNames(std::string_view dir) {
  std::vector<std::string> names;
  for (std::string_view path : EmbeddedProfilePaths()) {
    if (path.substr(0, dir.size()) != dir) continue;
    std::string_view name = path.substr(dir.size());
    names.emplace_back(name.substr(0, name.rfind(".yaml")));
  }
  std::sort(names.begin(), names.end());
  return names;
}

template <typename Profile>
Status Load(const std::string& name_or_path, std::string_view dir, const char* kind,
            Status (*parse)(std::string_view, const std::string&, Profile*), Profile* out) {
  if (IsProfilePath(name_or_path)) {
    std::string text;
    if (Status s = ReadWholeFile(name_or_path, "the profile for reading", &text); !s.ok()) return s;
    return parse(text, name_or_path, out);
  }
  // A shipped profile is embedded, so it never changes: parsed once per process (a search or a
  // calibration loads the same ones for every virtual run).
  static std::mutex mutex;
  static std::map<std::string, Profile> parsed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = parsed.find(name_or_path); it != parsed.end()) {
      *out = it->second;
      return Status::Ok();
    }
  }
  const std::string path = fmt::format("{}{}.yaml", dir, name_or_path);
  std::string_view text = EmbeddedProfile(path);
  if (text.empty()) {
    std::string names;
    for (const auto& n : ShippedNames(dir)) names += (names.empty() ? "" : ", ") + n;
    return Status::NotFound(fmt::format(
        "unknown {} profile '{}': expected a shipped name ({}) or a path to a .yaml file", kind,
        name_or_path, names));
  }
  if (Status s = parse(text, path + " (embedded)", out); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mutex);
  parsed.emplace(name_or_path, *out);
  return Status::Ok();
}

}  // namespace

Status ParseHardwareProfile(std::string_view yaml, const std::string& origin,
                            HardwareProfile* out) {
  YamlDocument document(origin, yaml, "the hardware profile");
  if (!document.ok()) return document.status();
  YamlReader& reader = document.reader();
  YamlMap& r = document.root();
  HardwareProfile hw;
  hw.source = origin;
  double memory_gb = 0, hbm = 0, bf16 = 0, fp8 = 0, fp4 = 0, host = 0;
  r.ReadText("name", &hw.name, YamlMap::kRequired);
  r.ReadInt("gpus_per_node", &hw.gpus_per_node, 1, YamlMap::kRequired);
  r.ReadNumber("memory_gb", &memory_gb, 0.001, YamlMap::kRequired);
  r.ReadNumber("hbm_gb_per_s", &hbm, 0.001, YamlMap::kRequired);
  r.ReadNumber("peak_bf16_tflops", &bf16, 0.001, YamlMap::kRequired);
  r.ReadNumber("peak_fp8_tflops", &fp8);
  r.ReadNumber("peak_fp4_tflops", &fp4);
  r.ReadNumber("host_link_gb_per_s", &host);
  r.ReadNumber("max_power_w", &hw.max_power_w);
  ReadLink(r.Section("intra_node", true), &hw.intra_node);
  ReadLink(r.Section("inter_node", true), &hw.inter_node);
  YamlMap e = r.Section("efficiency");
  e.ReadFraction("flops", &hw.flops_efficiency);
  e.ReadFraction("hbm", &hw.hbm_efficiency);
  e.ReadFraction("intra_node", &hw.intra_node_efficiency);
  e.ReadFraction("inter_node", &hw.inter_node_efficiency);
  e.Finish();
  r.Finish();
  if (!reader.ok()) return reader.status();
  hw.memory_bytes = memory_gb * 1e9;
  hw.hbm_bytes_per_s = hbm * 1e9;
  hw.peak_bf16_flops = bf16 * 1e12;
  hw.peak_fp8_flops = (fp8 > 0 ? fp8 : bf16) * 1e12;
  hw.peak_fp4_flops = fp4 * 1e12;
  hw.host_link_bytes_per_s = host * 1e9;
  *out = hw;
  return Status::Ok();
}

Status ParseModelProfile(std::string_view yaml, const std::string& origin, ModelProfile* out) {
  YamlDocument document(origin, yaml, "the model profile");
  if (!document.ok()) return document.status();
  YamlReader& reader = document.reader();
  YamlMap& r = document.root();
  ModelProfile m;
  m.source = origin;
  m.weight_bytes_per_param = {{"bf16", 2.0}, {"fp16", 2.0}, {"fp8", 1.0}, {"fp4", 0.5}};
  r.ReadText("name", &m.name, YamlMap::kRequired);
  r.ReadInt("layers", &m.layers, 1, YamlMap::kRequired);
  r.ReadInt("hidden_size", &m.hidden_size, 1, YamlMap::kRequired);
  r.ReadInt("intermediate_size", &m.intermediate_size, 1, YamlMap::kRequired);
  r.ReadInt("vocab_size", &m.vocab_size, 1, YamlMap::kRequired);
  r.ReadBool("tie_word_embeddings", &m.tie_word_embeddings);
  {
    YamlMap a = r.Section("attention", true);
    const YAML::Node kind = a.Required("kind");
    a.ReadInt("heads", &m.heads, 1, YamlMap::kRequired);
    const std::string name = kind.IsScalar() ? kind.Scalar() : "";
    if (name == "gqa") {
      m.attention = AttentionKind::kGqa;
      a.ReadInt("kv_heads", &m.kv_heads, 1, YamlMap::kRequired);
      a.ReadInt("head_dim", &m.head_dim, 1, YamlMap::kRequired);
    } else if (name == "mla") {
      m.attention = AttentionKind::kMla;
      a.ReadInt("q_lora_rank", &m.q_lora_rank, 0);
      a.ReadInt("kv_lora_rank", &m.kv_lora_rank, 1, YamlMap::kRequired);
      a.ReadInt("qk_nope_head_dim", &m.qk_nope_head_dim, 1, YamlMap::kRequired);
      a.ReadInt("qk_rope_head_dim", &m.qk_rope_head_dim, 0, YamlMap::kRequired);
      a.ReadInt("v_head_dim", &m.v_head_dim, 1, YamlMap::kRequired);
    } else if (kind.IsDefined() && !kind.IsNull()) {
      reader.Fail(kind, fmt::format("expected attention kind 'gqa' or 'mla', found {}",
                                    DescribeYamlNode(kind)));
    }
    a.ReadInt("sliding_window", &m.sliding_window_tok, 1);
    m.sliding_layers = m.sliding_window_tok > 0 ? m.layers : 0;
    a.ReadInt("sliding_layers", &m.sliding_layers, 0);
    YamlMap sparse = a.Section("sparse");
    if (sparse.is_map()) {
      m.sparse_layers = m.layers - m.sliding_layers;
      sparse.ReadInt("layers", &m.sparse_layers, 0);
      sparse.ReadInt("top_k", &m.sparse_top_k, 1, YamlMap::kRequired);
      sparse.ReadInt("indexer_heads", &m.indexer_heads, 0);
      sparse.ReadInt("indexer_head_dim", &m.indexer_head_dim, 0);
    }
    sparse.Finish();
    if (reader.ok() && m.sliding_layers + m.sparse_layers > m.layers) {
      reader.Fail(a.Get("sliding_layers"),
                  fmt::format("expected sliding_layers + sparse.layers <= layers ({}), found {} "
                              "+ {}",
                              m.layers, m.sliding_layers, m.sparse_layers));
    }
    a.Finish();
  }
  {
    YamlMap e = r.Section("moe");
    if (e.is_map()) {
      e.ReadInt("experts", &m.experts, 1, YamlMap::kRequired);
      e.ReadInt("active_experts", &m.active_experts, 1, YamlMap::kRequired);
      e.ReadInt("shared_experts", &m.shared_experts, 0);
      e.ReadInt("expert_intermediate_size", &m.expert_intermediate_size, 1, YamlMap::kRequired);
      e.ReadInt("dense_layers", &m.dense_layers, 0);
      if (reader.ok() && m.active_experts > m.experts) {
        reader.Fail(e.Get("active_experts"),
                    fmt::format("expected active_experts <= experts ({}), found {}", m.experts,
                                m.active_experts));
      }
    }
    e.Finish();
  }
  {
    YamlMap p = r.Section("params");
    if (p.is_map()) {
      p.ReadNumber("total", &m.params_total_override, 1, YamlMap::kRequired);
      p.ReadNumber("active", &m.params_active_override, 1, YamlMap::kRequired);
      if (reader.ok() && m.params_active_override > m.params_total_override) {
        reader.Fail(p.Get("active"), "expected params.active <= params.total");
      }
    }
    p.Finish();
  }
  r.ReadText("native_precision", &m.native_precision);
  {
    // The keys are precisions (data): every one is read, none is unknown.
    YamlMap w = r.Section("weight_bytes_per_param");
    for (const auto& [key, value] : w.Entries()) {
      const std::string precision = reader.Text(key, "weight_bytes_per_param key");
      const double bytes = reader.Number(value, precision, 0.01);
      if (reader.ok()) m.weight_bytes_per_param[precision] = bytes;
    }
  }
  {
    YamlMap k = r.Section("kv");
    k.ReadNumber("bytes_per_token", &m.kv_bytes_per_token_override, 0.01);
    k.ReadText("dtype", &m.kv_dtype);
    k.ReadNumber("prefill_overhead", &m.prefill_overhead);
    if (reader.ok() && DtypeBytes(m.kv_dtype) == 0) {
      reader.Fail(k.Get("dtype"), fmt::format("expected kv dtype bf16, fp16, fp8 or fp4, found {}",
                                              DescribeYamlNode(k.Get("dtype"))));
    }
    k.Finish();
  }
  r.Finish();
  if (!reader.ok()) return reader.status();
  if (m.experts > 0 && m.dense_layers > m.layers) {
    return Status::InvalidArgument(
        fmt::format("{}: expected moe.dense_layers <= layers ({}), found {}", origin, m.layers,
                    m.dense_layers));
  }
  if (!m.weight_bytes_per_param.count(m.native_precision)) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected native_precision to be a key of weight_bytes_per_param, found '{}'", origin,
        m.native_precision));
  }
  *out = m;
  return Status::Ok();
}

ModelParams ComputeParams(const ModelProfile& m) {
  ModelParams p;
  const double h = m.hidden_size;
  if (m.attention == AttentionKind::kGqa) {
    const double q = static_cast<double>(m.heads) * m.head_dim;
    const double kv = static_cast<double>(m.kv_heads) * m.head_dim;
    p.attention_per_layer = h * q + 2 * h * kv + q * h;
  } else {
    const double qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim;
    const double q = m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank * m.heads * qk_head
                                       : h * m.heads * qk_head;
    const double kv =
        h * (m.kv_lora_rank + m.qk_rope_head_dim) +
        static_cast<double>(m.kv_lora_rank) * m.heads * (m.qk_nope_head_dim + m.v_head_dim);
    const double o = static_cast<double>(m.heads) * m.v_head_dim * h;
    p.attention_per_layer = q + kv + o;
  }
  const double dense_mlp = 3 * h * m.intermediate_size;
  const int moe_layers = m.experts > 0 ? m.layers - m.dense_layers : 0;
  const int dense_layers = m.layers - moe_layers;
  p.moe_layers = moe_layers;
  p.expert_each = 3 * h * m.expert_intermediate_size;
  const double router = h * m.experts;
  const double shared = m.shared_experts * p.expert_each;
  p.routed_total = moe_layers * m.experts * p.expert_each;
  p.embedding = static_cast<double>(m.vocab_size) * h;
  p.lm_head = m.tie_word_embeddings ? 0 : p.embedding;
  p.output_projection = p.embedding;
  const double common = m.layers * p.attention_per_layer + dense_layers * dense_mlp +
                        moe_layers * (router + shared) + p.embedding + p.lm_head;
  p.total = common + p.routed_total;
  p.active = common + moe_layers * m.active_experts * p.expert_each;
  if (m.params_total_override > 0) p.total = m.params_total_override;
  if (m.params_active_override > 0) p.active = m.params_active_override;
  p.routed_total = std::min(p.routed_total, p.total);
  return p;
}

Status KvBytesPerToken(const ModelProfile& m, const std::string& kv_dtype, double* out) {
  const std::string dtype = kv_dtype.empty() || kv_dtype == "auto" ? m.kv_dtype : kv_dtype;
  const double bytes = DtypeBytes(dtype);
  if (bytes == 0) {
    return Status::InvalidArgument(
        fmt::format("expected a KV dtype bf16, fp16, fp8, fp4 or auto, found '{}'", kv_dtype));
  }
  if (m.kv_bytes_per_token_override > 0) {
    if (dtype != m.kv_dtype) {
      return Status::InvalidArgument(fmt::format(
          "model {} gives its KV size for kv dtype {} only (found '{}'); use auto or {}", m.name,
          m.kv_dtype, kv_dtype, m.kv_dtype));
    }
    *out = m.kv_bytes_per_token_override;
    return Status::Ok();
  }
  const double per_layer =
      m.attention == AttentionKind::kGqa
          ? 2.0 * m.kv_heads * m.head_dim
          : static_cast<double>(m.kv_lora_rank) + static_cast<double>(m.qk_rope_head_dim);
  *out = per_layer * m.layers * bytes;
  return Status::Ok();
}

Status WeightBytesPerParam(const ModelProfile& m, const std::string& precision, double* out) {
  const std::string p = precision.empty() || precision == "native" ? m.native_precision : precision;
  auto it = m.weight_bytes_per_param.find(p);
  if (it == m.weight_bytes_per_param.end()) {
    std::string known;
    for (const auto& [name, bytes] : m.weight_bytes_per_param) {
      known += (known.empty() ? "" : ", ") + name;
    }
    return Status::InvalidArgument(fmt::format(
        "model {}: expected a precision among {} or native, found '{}'", m.name, known, precision));
  }
  *out = it->second;
  return Status::Ok();
}

Status LoadHardwareProfile(const std::string& name_or_path, HardwareProfile* out) {
  return Load<HardwareProfile>(name_or_path, kHardwareDir, "hardware", &ParseHardwareProfile, out);
}

Status LoadModelProfile(const std::string& name_or_path, ModelProfile* out) {
  return Load<ModelProfile>(name_or_path, kModelDir, "model", &ParseModelProfile, out);
}

std::vector<std::string> ShippedHardwareProfiles() { return ShippedNames(kHardwareDir); }
std::vector<std::string> ShippedModelProfiles() { return ShippedNames(kModelDir); }

Status InferModelProfileName(const std::string& served_model, std::string* profile) {
  std::string lower = served_model;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string best;
  for (const auto& candidate : ShippedModelProfiles()) {
    if (lower.find(candidate) != std::string::npos && candidate.size() > best.size()) {
      best = candidate;
    }
  }
  if (best.empty()) {
    std::string shipped;
    for (const auto& candidate : ShippedModelProfiles()) {
      shipped += (shipped.empty() ? "" : ", ") + candidate;
    }
    return Status::NotFound(fmt::format(
        "expected a model profile (a shipped one: {}; or a YAML path) for model '{}', found "
        "none, and no shipped profile's name appears in the model name",
        shipped, served_model));
  }
  *profile = best;
  return Status::Ok();
}

HardwareProfile HardwareFromProbes(const HardwareProfile& base, const ProbeFigures& probes) {
  HardwareProfile hw = base;
  hw.name = base.name + "-measured";
  hw.source = "probe figures over " + base.source;
  if (probes.hbm_bytes_per_s > 0) {
    hw.hbm_bytes_per_s = probes.hbm_bytes_per_s;
    hw.hbm_efficiency = 1.0;
  }
  // One efficiency covers every precision: take the measured ones at face value and scale the
  // unmeasured peaks so they keep their ratio to a measured one.
  if (probes.bf16_flops > 0 || probes.fp8_flops > 0) {
    const double scale = probes.bf16_flops > 0 ? probes.bf16_flops / base.peak_bf16_flops
                                               : probes.fp8_flops / base.peak_fp8_flops;
    hw.peak_bf16_flops = probes.bf16_flops > 0 ? probes.bf16_flops : base.peak_bf16_flops * scale;
    hw.peak_fp8_flops = probes.fp8_flops > 0 ? probes.fp8_flops : base.peak_fp8_flops * scale;
    hw.peak_fp4_flops = base.peak_fp4_flops * (hw.peak_fp8_flops / base.peak_fp8_flops);
    hw.flops_efficiency = 1.0;
  }
  if (probes.host_link_bytes_per_s > 0) hw.host_link_bytes_per_s = probes.host_link_bytes_per_s;
  if (probes.nccl_busbw_bytes_per_s > 0) {
    hw.intra_node.busbw_bytes_per_s = probes.nccl_busbw_bytes_per_s;
    hw.intra_node_efficiency = 1.0;
  }
  return hw;
}

}  // namespace servesweep::perfmodel
