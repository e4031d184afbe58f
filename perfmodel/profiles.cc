#include "perfmodel/profiles.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/unknown_key.h"
#include "common/yaml_found.h"

namespace servesweep::perfmodel {
namespace {

constexpr std::string_view kHardwareDir = "profiles/hardware/";
constexpr std::string_view kModelDir = "profiles/models/";

std::string Found(const YAML::Node& node) { return DescribeYamlNode(node); }

// Walks one YAML mapping: typed getters record the first error with its position; Finish()
// rejects keys that were never asked for.
class MapReader {
 public:
  MapReader(const YAML::Node& map, std::string section, const std::string& origin)
      : map_(map), section_(std::move(section)), origin_(origin) {
    if (!map.IsMap())
      Fail(map, fmt::format("expected {} as a mapping, found {}", section_, Found(map)));
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  void Fail(const YAML::Node& node, const std::string& what) {
    if (!status_.ok()) return;
    const YAML::Mark mark = node.Mark();
    status_ = Status::Error(
        mark.line < 0 ? fmt::format("{}: {}", origin_, what)
                      : fmt::format("{}:{}:{}: {}", origin_, mark.line + 1, mark.column + 1, what));
  }

  // The value under `key`, or a null node; marks the key as known.
  YAML::Node Get(const std::string& key) {
    known_.push_back(key);
    if (!map_.IsMap()) return YAML::Node();
    const YAML::Node& map = map_;  // const: a lookup must not insert the key
    return map[key];
  }

  void Number(const std::string& key, bool required, double min_value, double* out) {
    const YAML::Node node = Get(key);
    if (!node.IsDefined() || node.IsNull()) {
      if (required) Fail(map_, fmt::format("expected '{}' in {}, found none", key, section_));
      return;
    }
    double value = 0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !std::isfinite(value) ||
        value < min_value) {
      Fail(node, fmt::format("expected '{}' to be a number >= {}, found {}", key, min_value,
                             Found(node)));
      return;
    }
    *out = value;
  }

  // An optional fraction in (0, 1].
  void Fraction(const std::string& key, double* out) {
    const YAML::Node node = Get(key);
    if (!node.IsDefined() || node.IsNull()) return;
    double value = 0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !(value > 0) ||
        value > 1) {
      Fail(node,
           fmt::format("expected '{}' to be a fraction in (0, 1], found {}", key, Found(node)));
      return;
    }
    *out = value;
  }

  void Int(const std::string& key, bool required, int64_t min_value, int* out) {
    const YAML::Node node = Get(key);
    if (!node.IsDefined() || node.IsNull()) {
      if (required) Fail(map_, fmt::format("expected '{}' in {}, found none", key, section_));
      return;
    }
    int64_t value = 0;
    if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, value) || value < min_value ||
        value > 100'000'000) {
      Fail(node, fmt::format("expected '{}' to be an integer >= {}, found {}", key, min_value,
                             Found(node)));
      return;
    }
    *out = static_cast<int>(value);
  }

  void Bool(const std::string& key, bool* out) {
    const YAML::Node node = Get(key);
    if (!node.IsDefined() || node.IsNull()) return;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, *out)) {
      Fail(node, fmt::format("expected '{}' to be true or false, found {}", key, Found(node)));
    }
  }

  void String(const std::string& key, bool required, std::string* out) {
    const YAML::Node node = Get(key);
    if (!node.IsDefined() || node.IsNull()) {
      if (required) Fail(map_, fmt::format("expected '{}' in {}, found none", key, section_));
      return;
    }
    if (!node.IsScalar() || node.Scalar().empty()) {
      Fail(node, fmt::format("expected '{}' to be a string, found {}", key, Found(node)));
      return;
    }
    *out = node.Scalar();
  }

  // A nested mapping, read by `read` (skipped when absent unless required).
  void Section(const std::string& key, bool required, const std::function<void(MapReader&)>& read) {
    const YAML::Node node = Get(key);
    if (!node.IsDefined() || node.IsNull()) {
      if (required) Fail(map_, fmt::format("expected '{}' in {}, found none", key, section_));
      return;
    }
    MapReader inner(node, section_ + "." + key, origin_);
    if (inner.ok()) {
      read(inner);
      inner.Finish();
    }
    if (!inner.ok() && status_.ok()) status_ = inner.status();
  }

  // Rejects keys nobody asked for, suggesting the closest known one. A misspelt key explains
  // the other errors it causes (a required key "missing"), so its error wins.
  void Finish() {
    if (!map_.IsMap()) return;
    for (const auto& entry : map_) {
      const std::string key = entry.first.Scalar();
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      status_ = Status::Ok();
      Fail(entry.first, UnknownKeyMessage(key, section_, known_));
      return;
    }
  }

  const YAML::Node& node() const { return map_; }

 private:
  YAML::Node map_;
  std::string section_;
  const std::string& origin_;
  Status status_;
  std::vector<std::string> known_;
};

Status ParseYaml(std::string_view text, const std::string& origin, YAML::Node* out) {
  try {
    *out = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::Error(
        fmt::format("{}:{}:{}: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  return Status::Ok();
}

void ReadLink(MapReader& r, LinkProfile* link) {
  double gb_per_s = 0, latency_us = 0;
  r.Number("busbw_gb_per_s", true, 0, &gb_per_s);
  r.Number("latency_us", true, 0, &latency_us);
  link->busbw_bytes_per_s = gb_per_s * 1e9;
  link->latency_ns = static_cast<int64_t>(std::llround(latency_us * 1e3));
}

double DtypeBytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16" || dtype == "auto") return 2;
  if (dtype == "fp8" || dtype == "fp8_e4m3" || dtype == "fp8_e5m2") return 1;
  if (dtype == "fp4" || dtype == "nvfp4" || dtype == "mxfp4") return 0.5;
  return 0;
}

Status ReadText(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(fmt::format("{}: cannot open the profile for reading", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return Status::Ok();
}

bool LooksLikePath(const std::string& s) {
  auto ends_with = [&](std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return s.find('/') != std::string::npos || ends_with(".yaml") || ends_with(".yml");
}

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
  if (LooksLikePath(name_or_path)) {
    std::string text;
    if (Status s = ReadText(name_or_path, &text); !s.ok()) return s;
    return parse(text, name_or_path, out);
  }
  const std::string path = fmt::format("{}{}.yaml", dir, name_or_path);
  std::string_view text = EmbeddedProfile(path);
  if (text.empty()) {
    std::string names;
    for (const auto& n : ShippedNames(dir)) names += (names.empty() ? "" : ", ") + n;
    return Status::Error(fmt::format(
        "unknown {} profile '{}': expected a shipped name ({}) or a path to a .yaml file", kind,
        name_or_path, names));
  }
  return parse(text, path + " (embedded)", out);
}

}  // namespace

Status ParseHardwareProfile(std::string_view yaml, const std::string& origin,
                            HardwareProfile* out) {
  YAML::Node root;
  if (Status s = ParseYaml(yaml, origin, &root); !s.ok()) return s;
  MapReader r(root, "the hardware profile", origin);
  if (!r.ok()) return r.status();
  HardwareProfile hw;
  hw.source = origin;
  double memory_gb = 0, hbm = 0, bf16 = 0, fp8 = 0, fp4 = 0, host = 0;
  r.String("name", true, &hw.name);
  r.Int("gpus_per_node", true, 1, &hw.gpus_per_node);
  r.Number("memory_gb", true, 0.001, &memory_gb);
  r.Number("hbm_gb_per_s", true, 0.001, &hbm);
  r.Number("peak_bf16_tflops", true, 0.001, &bf16);
  r.Number("peak_fp8_tflops", false, 0, &fp8);
  r.Number("peak_fp4_tflops", false, 0, &fp4);
  r.Number("host_link_gb_per_s", false, 0, &host);
  r.Section("intra_node", true, [&](MapReader& link) { ReadLink(link, &hw.intra_node); });
  r.Section("inter_node", true, [&](MapReader& link) { ReadLink(link, &hw.inter_node); });
  r.Section("efficiency", false, [&](MapReader& e) {
    e.Fraction("flops", &hw.flops_efficiency);
    e.Fraction("hbm", &hw.hbm_efficiency);
    e.Fraction("intra_node", &hw.intra_node_efficiency);
    e.Fraction("inter_node", &hw.inter_node_efficiency);
  });
  r.Finish();
  if (!r.ok()) return r.status();
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
  YAML::Node root;
  if (Status s = ParseYaml(yaml, origin, &root); !s.ok()) return s;
  MapReader r(root, "the model profile", origin);
  if (!r.ok()) return r.status();
  ModelProfile m;
  m.source = origin;
  m.weight_bytes_per_param = {{"bf16", 2.0}, {"fp16", 2.0}, {"fp8", 1.0}, {"fp4", 0.5}};
  r.String("name", true, &m.name);
  r.Int("layers", true, 1, &m.layers);
  r.Int("hidden_size", true, 1, &m.hidden_size);
  r.Int("intermediate_size", true, 1, &m.intermediate_size);
  r.Int("vocab_size", true, 1, &m.vocab_size);
  r.Bool("tie_word_embeddings", &m.tie_word_embeddings);
  r.Section("attention", true, [&](MapReader& a) {
    std::string kind;
    a.String("kind", true, &kind);
    a.Int("heads", true, 1, &m.heads);
    if (kind == "gqa") {
      m.attention = AttentionKind::kGqa;
      a.Int("kv_heads", true, 1, &m.kv_heads);
      a.Int("head_dim", true, 1, &m.head_dim);
    } else if (kind == "mla") {
      m.attention = AttentionKind::kMla;
      a.Int("q_lora_rank", false, 0, &m.q_lora_rank);
      a.Int("kv_lora_rank", true, 1, &m.kv_lora_rank);
      a.Int("qk_nope_head_dim", true, 1, &m.qk_nope_head_dim);
      a.Int("qk_rope_head_dim", true, 0, &m.qk_rope_head_dim);
      a.Int("v_head_dim", true, 1, &m.v_head_dim);
    } else if (a.ok()) {
      a.Fail(a.node()["kind"], fmt::format("expected attention kind 'gqa' or 'mla', found {}",
                                           Found(a.node()["kind"])));
    }
  });
  r.Section("moe", false, [&](MapReader& e) {
    e.Int("experts", true, 1, &m.experts);
    e.Int("active_experts", true, 1, &m.active_experts);
    e.Int("shared_experts", false, 0, &m.shared_experts);
    e.Int("expert_intermediate_size", true, 1, &m.expert_intermediate_size);
    e.Int("dense_layers", false, 0, &m.dense_layers);
    if (e.ok() && m.active_experts > m.experts) {
      e.Fail(e.node()["active_experts"],
             fmt::format("expected active_experts <= experts ({}), found {}", m.experts,
                         m.active_experts));
    }
  });
  r.Section("params", false, [&](MapReader& p) {
    p.Number("total", true, 1, &m.params_total_override);
    p.Number("active", true, 1, &m.params_active_override);
    if (p.ok() && m.params_active_override > m.params_total_override) {
      p.Fail(p.node()["active"], "expected params.active <= params.total");
    }
  });
  r.String("native_precision", false, &m.native_precision);
  r.Section("weight_bytes_per_param", false, [&](MapReader& w) {
    for (const auto& entry : w.node()) {
      double bytes = 0;
      const std::string key = entry.first.Scalar();
      w.Number(key, true, 0.01, &bytes);
      if (w.ok()) m.weight_bytes_per_param[key] = bytes;
    }
  });
  r.Section("kv", false, [&](MapReader& k) {
    k.Number("bytes_per_token", false, 0.01, &m.kv_bytes_per_token_override);
    k.String("dtype", false, &m.kv_dtype);
    k.Number("prefill_overhead", false, 0, &m.prefill_overhead);
    if (k.ok() && DtypeBytes(m.kv_dtype) == 0) {
      k.Fail(k.node()["dtype"], fmt::format("expected kv dtype bf16, fp16, fp8 or fp4, found {}",
                                            Found(k.node()["dtype"])));
    }
  });
  r.Finish();
  if (!r.ok()) return r.status();
  if (m.experts > 0 && m.dense_layers > m.layers) {
    return Status::Error(fmt::format("{}: expected moe.dense_layers <= layers ({}), found {}",
                                     origin, m.layers, m.dense_layers));
  }
  if (!m.weight_bytes_per_param.count(m.native_precision)) {
    return Status::Error(fmt::format(
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
    return Status::Error(
        fmt::format("expected a KV dtype bf16, fp16, fp8, fp4 or auto, found '{}'", kv_dtype));
  }
  if (m.kv_bytes_per_token_override > 0) {
    if (dtype != m.kv_dtype) {
      return Status::Error(fmt::format(
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
    return Status::Error(fmt::format(
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
    return Status::Error(fmt::format(
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
