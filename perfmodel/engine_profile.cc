#include "perfmodel/engine_profile.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "common/file_text.h"
#include "common/yaml_reader.h"
#include "perfmodel/profiles.h"

namespace servesweep::perfmodel {
namespace {

constexpr std::string_view kEngineDir = "profiles/engines/";
constexpr const char* kFallbackProfile = "default";

// One scalar coefficient: where it lives in the YAML and in the struct, and its bounds. The one
// table that reading, writing and calibrate's named access all use.
struct Scalar {
  const char* section;
  const char* key;
  double EngineCoefficients::*member;
  double min_value;
  double max_value;
};

constexpr Scalar kScalars[] = {
    {"kernels", "gemm_efficiency", &EngineCoefficients::gemm_efficiency, 0.001, 1},
    {"kernels", "gemm_half_tok", &EngineCoefficients::gemm_half_tok, 0, 1e6},
    {"kernels", "weight_read_efficiency", &EngineCoefficients::weight_read_efficiency, 0.001, 1},
    {"kernels", "expert_gemm_efficiency", &EngineCoefficients::expert_gemm_efficiency, 0.001, 1},
    {"kernels", "expert_half_tok", &EngineCoefficients::expert_half_tok, 0, 1e6},
    {"kernels", "expert_read_efficiency", &EngineCoefficients::expert_read_efficiency, 0.001, 1},
    {"launch", "layer_gpu_us", &EngineCoefficients::layer_gpu_us, 0, 1e6},
    {"launch", "mla_layer_gpu_us", &EngineCoefficients::mla_layer_gpu_us, 0, 1e6},
    {"launch", "layer_launch_us", &EngineCoefficients::layer_launch_us, 0, 1e6},
    {"collectives", "allreduce_us", &EngineCoefficients::allreduce_us, 0, 1e6},
    {"collectives", "all_to_all_us", &EngineCoefficients::all_to_all_us, 0, 1e6},
    {"cpu", "step_us", &EngineCoefficients::step_cpu_us, 0, 1e7},
    {"cpu", "seq_us", &EngineCoefficients::seq_cpu_us, 0, 1e6},
    {"cpu", "tok_us", &EngineCoefficients::tok_cpu_us, 0, 1e6},
    {"cpu", "overlap", &EngineCoefficients::cpu_overlap, 0, 1},
    {"cpu", "request_us", &EngineCoefficients::request_us, 0, 1e8},
    {"cpu", "api_request_us", &EngineCoefficients::api_request_us, 0, 1e7},
    {"cpu", "api_token_us", &EngineCoefficients::api_token_us, 0, 1e6},
    {"startup", "init_s", &EngineCoefficients::startup_init_s, 0, 3600},
    {"startup", "weight_load_gb_per_s", &EngineCoefficients::weight_load_gb_per_s, 0.01, 1000},
    {"startup", "graph_capture_s", &EngineCoefficients::graph_capture_s, 0, 3600},
};
constexpr const char* kAttentionKinds[] = {"gqa", "mla", "sparse"};

const Scalar* FindScalar(const std::string& name) {
  for (const Scalar& s : kScalars) {
    if (name == fmt::format("{}.{}", s.section, s.key)) return &s;
  }
  return nullptr;
}

void ReadScalar(YamlMap& section, const Scalar& s, EngineCoefficients* c) {
  const YAML::Node node = section.Get(s.key);
  if (!node.IsDefined() || node.IsNull()) return;
  const std::string name = fmt::format("{}.{}", s.section, s.key);
  const double value = section.reader().Number(node, name, s.min_value);
  if (section.reader().ok() && value > s.max_value) {
    section.reader().Fail(
        node, fmt::format("expected '{}' at most {}, found {}", name, s.max_value, value));
    return;
  }
  if (section.reader().ok()) c->*s.member = value;
}

void ReadRange(YamlMap& m, const std::string& key, double* low, double* high) {
  const YAML::Node node = m.Get(key);
  if (!node.IsDefined() || node.IsNull()) return;
  YamlReader& r = m.reader();
  if (!node.IsSequence() || node.size() != 2) {
    r.Fail(node,
           fmt::format("expected '{}' to be [low, high], found {}", key, DescribeYamlNode(node)));
    return;
  }
  *low = r.Number(node[0], key);
  *high = r.Number(node[1], key);
  if (r.ok() && *high < *low) {
    r.Fail(node, fmt::format("expected '{}' low <= high, found [{}, {}]", key, *low, *high));
  }
}

void ReadCalibration(YamlMap c, Calibration* out) {
  YamlReader& r = c.reader();
  c.ReadBool("fitted", &out->fitted);
  if (auto v = c.Get("fitted_at"); v.IsDefined()) out->fitted_at = r.Text(v, "fitted_at");
  if (auto v = c.Get("fitted_by"); v.IsDefined()) out->fitted_by = r.Text(v, "fitted_by");
  if (auto v = c.Get("sources"); v.IsDefined()) out->sources = r.TextList(v, "sources", true);
  c.ReadInt("points", &out->points, 0);
  c.ReadNumber("fit_error_pct", &out->fit_error_pct);
  c.ReadNumber("typical_error_pct", &out->typical_error_pct);
  YamlMap range = c.Section("range");
  if (range.is_map()) {
    CalibrationRange& g = out->range;
    if (auto v = range.Get("models"); v.IsDefined()) g.models = r.TextList(v, "models", true);
    if (auto v = range.Get("hardware"); v.IsDefined()) {
      g.hardware = r.TextList(v, "hardware", true);
    }
    if (auto v = range.Get("layouts"); v.IsDefined()) g.layouts = r.TextList(v, "layouts", true);
    ReadRange(range, "input_tok", &g.input_tok_min, &g.input_tok_max);
    ReadRange(range, "output_tok", &g.output_tok_min, &g.output_tok_max);
    ReadRange(range, "load", &g.load_min, &g.load_max);
  }
  range.Finish();
  c.Finish();
}

// Leading dotted numbers of a version ("v0.5.3.post3" -> 0 5 3), empty when there are none.
std::vector<long> VersionNumbers(const std::string& version) {
  std::vector<long> out;
  size_t i = !version.empty() && (version[0] == 'v' || version[0] == 'V') ? 1 : 0;
  while (i < version.size() && std::isdigit(static_cast<unsigned char>(version[i]))) {
    long n = 0;
    while (i < version.size() && std::isdigit(static_cast<unsigned char>(version[i]))) {
      n = n * 10 + (version[i] - '0');
      ++i;
    }
    out.push_back(n);
    if (i + 1 < version.size() && version[i] == '.' &&
        std::isdigit(static_cast<unsigned char>(version[i + 1]))) {
      ++i;
    } else {
      break;
    }
  }
  return out;
}

}  // namespace

bool CompareVersions(const std::string& a, const std::string& b, int* order) {
  std::vector<long> x = VersionNumbers(a), y = VersionNumbers(b);
  if (x.empty() || y.empty()) return false;
  const size_t n = std::max(x.size(), y.size());
  x.resize(n, 0);
  y.resize(n, 0);
  *order = x < y ? -1 : (x == y ? 0 : 1);
  return true;
}

bool InVersionRange(const VersionRange& range, const std::string& version) {
  int order = 0;
  if (!range.from.empty() && (!CompareVersions(version, range.from, &order) || order < 0)) {
    return false;
  }
  if (!range.before.empty() && (!CompareVersions(version, range.before, &order) || order >= 0)) {
    return false;
  }
  return true;
}

Status ParseEngineProfile(std::string_view yaml, const std::string& origin, EngineProfile* out) {
  YamlDocument document(origin, yaml, "the engine profile");
  if (!document.ok()) return document.status();
  YamlReader& reader = document.reader();
  YamlMap& r = document.root();
  EngineProfile p;
  p.source = origin;
  r.ReadText("name", &p.name, YamlMap::kRequired);
  r.ReadText("engine", &p.engine, YamlMap::kRequired);
  r.ReadText("architecture", &p.architecture);
  if (reader.ok() && p.architecture != kAnyArchitecture && p.architecture != kDenseArchitecture &&
      p.architecture != kMoeArchitecture) {
    reader.Fail(
        r.Get("architecture"),
        fmt::format("expected 'architecture' any, dense or moe, found '{}'", p.architecture));
  }
  {
    YamlMap v = r.Section("versions");
    v.ReadText("from", &p.versions.from);
    v.ReadText("before", &p.versions.before);
    int order = 0;
    for (const auto* bound : {&p.versions.from, &p.versions.before}) {
      if (reader.ok() && !bound->empty() && !CompareVersions(*bound, *bound, &order)) {
        reader.Fail(v.Get(bound == &p.versions.from ? "from" : "before"),
                    fmt::format("expected a version such as 0.6.0, found '{}'", *bound));
      }
    }
    v.Finish();
  }
  {
    YamlMap d = r.Section("defaults");
    d.ReadInt("max_num_seqs", &p.defaults.max_num_seqs, 1);
    d.ReadInt("max_num_batched_tokens", &p.defaults.max_num_batched_tokens, 1);
    d.ReadBool("chunked_prefill", &p.defaults.chunked_prefill);
    d.ReadBool("mixed_batches", &p.defaults.mixed_batches);
    d.ReadFraction("gpu_memory_utilization", &p.defaults.gpu_memory_utilization);
    d.ReadNumber("activation_reserve_gb", &p.defaults.activation_reserve_gb);
    d.ReadInt("decode_steps", &p.defaults.decode_steps, 1);
    d.ReadInt("prefill_chunk_tok", &p.defaults.prefill_chunk_tok, 0);
    d.ReadNumber("sliding_kv_ratio", &p.defaults.sliding_kv_ratio, 0);
    if (p.defaults.sliding_kv_ratio > 1) {
      reader.Fail(d.Get("sliding_kv_ratio"),
                  fmt::format("expected 'sliding_kv_ratio' in [0, 1], found {}",
                              p.defaults.sliding_kv_ratio));
    }
    YamlMap large = d.Section("large_gpu");
    if (large.is_map()) {
      large.ReadNumber("min_memory_gb", &p.defaults.large_gpu_memory_gb, 1, YamlMap::kRequired);
      if (auto v = large.Get("except"); v.IsDefined()) {
        p.defaults.large_gpu_except = reader.TextList(v, "except", true);
      }
      large.ReadInt("max_num_seqs", &p.defaults.large_gpu_max_num_seqs, 1);
      large.ReadInt("max_num_batched_tokens", &p.defaults.large_gpu_max_num_batched_tokens, 1);
    }
    large.Finish();
    d.Finish();
  }
  EngineCoefficients& c = p.coefficients;
  for (const char* name : {"kernels", "launch", "collectives", "cpu", "startup"}) {
    YamlMap section = r.Section(name);
    for (const Scalar& s : kScalars) {
      if (std::string_view(s.section) == name) ReadScalar(section, s, &c);
    }
    if (std::string_view(name) == "kernels") {
      YamlMap a = section.Section("attention_efficiency");
      for (const char* kind : kAttentionKinds) {
        double value = 0;
        a.ReadFraction(kind, &value);
        if (value > 0) c.attention_efficiency[kind] = value;
      }
      a.Finish();
    }
    if (std::string_view(name) == "launch") {
      section.ReadInt("cuda_graph_max_tok", &c.cuda_graph_max_tok, 0);
      section.ReadBool("graph_mixed_batches", &c.graph_mixed_batches);
    }
    section.Finish();
  }
  ReadCalibration(r.Section("calibration"), &p.calibration);
  r.Finish();
  if (!reader.ok()) return reader.status();
  *out = std::move(p);
  return Status::Ok();
}

std::vector<std::string> ShippedEngineProfiles() {
  std::vector<std::string> names;
  for (std::string_view path : EmbeddedProfilePaths()) {
    if (path.substr(0, kEngineDir.size()) != kEngineDir) continue;
    std::string_view name = path.substr(kEngineDir.size());
    names.emplace_back(name.substr(0, name.rfind(".yaml")));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status LoadEngineProfile(const std::string& name_or_path, EngineProfile* out) {
  if (IsProfilePath(name_or_path)) {
    std::string text;
    if (Status s = ReadWholeFile(name_or_path, "the engine profile", &text); !s.ok()) return s;
    return ParseEngineProfile(text, name_or_path, out);
  }
  // Embedded, so it never changes: parsed once per process (as profiles.cc's Load).
  static std::mutex mutex;
  static std::map<std::string, EngineProfile> parsed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = parsed.find(name_or_path); it != parsed.end()) {
      *out = it->second;
      return Status::Ok();
    }
  }
  const std::string path = fmt::format("{}{}.yaml", kEngineDir, name_or_path);
  const std::string_view text = EmbeddedProfile(path);
  if (text.empty()) {
    std::string names;
    for (const auto& n : ShippedEngineProfiles()) names += (names.empty() ? "" : ", ") + n;
    return Status::NotFound(fmt::format(
        "unknown engine profile '{}': expected a shipped name ({}) or a path to a .yaml file",
        name_or_path, names));
  }
  if (Status s = ParseEngineProfile(text, path + " (embedded)", out); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mutex);
  parsed.emplace(name_or_path, *out);
  return Status::Ok();
}

namespace {
// A model of unknown kind ("") is costed as a dense one.
std::string KindOf(const std::string& architecture) {
  return architecture.empty() ? kDenseArchitecture : architecture;
}
}  // namespace

bool ProfileCoversArchitecture(const EngineProfile& profile, const std::string& architecture) {
  return profile.architecture == kAnyArchitecture || profile.architecture == KindOf(architecture);
}

Status SelectEngineProfile(const std::string& engine, const std::string& version,
                           const std::string& architecture, EngineProfile* out, std::string* why) {
  why->clear();
  const std::string kind = KindOf(architecture);
  std::vector<EngineProfile> candidates;
  for (const auto& name : ShippedEngineProfiles()) {
    EngineProfile p;
    if (Status s = LoadEngineProfile(name, &p); !s.ok()) return s;
    if (p.engine == engine) candidates.push_back(std::move(p));
  }
  if (candidates.empty()) {
    *why = fmt::format("no engine profile for '{}': the generic '{}' profile", engine,
                       kFallbackProfile);
    return LoadEngineProfile(kFallbackProfile, out);
  }
  // The range: the one holding the version, else the nearest (below the lowest: the lowest;
  // else the highest starting at or below it), or the newest when no version is known.
  std::vector<const EngineProfile*> in_range;
  for (const auto& p : candidates) {
    if (!version.empty() && InVersionRange(p.versions, version)) in_range.push_back(&p);
  }
  if (in_range.empty()) {
    auto from_less = [](const EngineProfile& a, const EngineProfile& b) {
      int order = 0;
      return CompareVersions(a.versions.from.empty() ? "0" : a.versions.from,
                             b.versions.from.empty() ? "0" : b.versions.from, &order) &&
             order < 0;
    };
    std::stable_sort(candidates.begin(), candidates.end(), from_less);
    const EngineProfile* nearest = &candidates.back();
    int order = 0;
    if (!version.empty() && CompareVersions(version, version, &order)) {
      nearest = &candidates.front();
      for (const auto& p : candidates) {
        if (p.versions.from.empty() ||
            (CompareVersions(p.versions.from, version, &order) && order <= 0)) {
          nearest = &p;
        }
      }
    }
    for (const auto& p : candidates) {
      if (p.versions.from == nearest->versions.from &&
          p.versions.before == nearest->versions.before) {
        in_range.push_back(&p);
      }
    }
    *why = version.empty() ? fmt::format("no {} version given: the newest profile, ", engine)
                           : fmt::format("{} {} is outside every profile's versions: the nearest, ",
                                         engine, version);
  }
  // Within the range: the kind's own profile, else one for every kind, else the other kind's.
  const EngineProfile* chosen = nullptr;
  int chosen_rank = 3;
  for (const EngineProfile* p : in_range) {
    const int rank = p->architecture == kind ? 0 : (p->architecture == kAnyArchitecture ? 1 : 2);
    if (rank < chosen_rank) chosen = p, chosen_rank = rank;
  }
  if (!why->empty()) *why += chosen->name;
  if (chosen_rank == 2) {
    *why += fmt::format("{}no {} profile for {}{}: {}, fitted on {} models",
                        why->empty() ? "" : "; ", kind, engine,
                        version.empty() ? "" : " " + version, chosen->name, chosen->architecture);
  }
  *out = *chosen;
  return Status::Ok();
}

std::vector<std::string> CoefficientNames(const EngineProfile& profile) {
  std::vector<std::string> names;
  for (const Scalar& s : kScalars) names.push_back(fmt::format("{}.{}", s.section, s.key));
  for (const char* kind : kAttentionKinds) {
    names.push_back(fmt::format("kernels.attention_efficiency.{}", kind));
  }
  (void)profile;
  return names;
}

namespace {

Status UnknownCoefficient(const EngineProfile& profile, const std::string& name) {
  std::string known;
  for (const auto& n : CoefficientNames(profile)) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument(
      fmt::format("expected an engine coefficient ({}), found '{}'", known, name));
}

constexpr std::string_view kAttentionPrefix = "kernels.attention_efficiency.";

}  // namespace

Status GetCoefficient(const EngineProfile& profile, const std::string& name, double* value) {
  if (const Scalar* s = FindScalar(name)) {
    *value = profile.coefficients.*(s->member);
    return Status::Ok();
  }
  if (name.compare(0, kAttentionPrefix.size(), kAttentionPrefix) == 0) {
    const std::string kind = name.substr(kAttentionPrefix.size());
    for (const char* k : kAttentionKinds) {
      if (kind == k) {
        auto it = profile.coefficients.attention_efficiency.find(kind);
        *value = it == profile.coefficients.attention_efficiency.end() ? 1.0 : it->second;
        return Status::Ok();
      }
    }
  }
  return UnknownCoefficient(profile, name);
}

Status SetCoefficient(EngineProfile* profile, const std::string& name, double value) {
  if (const Scalar* s = FindScalar(name)) {
    profile->coefficients.*(s->member) = std::clamp(value, s->min_value, s->max_value);
    return Status::Ok();
  }
  double unused = 0;
  if (Status s = GetCoefficient(*profile, name, &unused); !s.ok()) return s;
  profile->coefficients.attention_efficiency[name.substr(kAttentionPrefix.size())] =
      std::clamp(value, 0.001, 1.0);
  return Status::Ok();
}

Status CoefficientBounds(const std::string& name, double* min_value, double* max_value) {
  if (const Scalar* s = FindScalar(name)) {
    *min_value = s->min_value;
    *max_value = s->max_value;
    return Status::Ok();
  }
  double unused = 0;
  if (Status s = GetCoefficient(EngineProfile{}, name, &unused); !s.ok()) return s;
  *min_value = 0.001;
  *max_value = 1;
  return Status::Ok();
}

namespace {

std::string YamlList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    out += fmt::format("{}\"{}\"", i > 0 ? ", " : "", items[i]);
  }
  return out + "]";
}

// Shortest text that reads back as the same double.
std::string Number(double v) { return fmt::format("{}", v); }

}  // namespace

std::string EngineProfileYaml(const EngineProfile& p, const std::string& header) {
  std::string out;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) out += "# " + line + "\n";
  out += fmt::format("name: {}\nengine: {}\n", p.name, p.engine);
  if (p.architecture != kAnyArchitecture) out += fmt::format("architecture: {}\n", p.architecture);
  if (!p.versions.from.empty() || !p.versions.before.empty()) {
    out += "versions: {";
    if (!p.versions.from.empty()) out += fmt::format("from: \"{}\"", p.versions.from);
    if (!p.versions.before.empty()) {
      out +=
          fmt::format("{}before: \"{}\"", p.versions.from.empty() ? "" : ", ", p.versions.before);
    }
    out += "}\n";
  }
  const EngineDefaults& d = p.defaults;
  out += fmt::format(
      "defaults:\n  max_num_seqs: {}\n  max_num_batched_tokens: {}\n  chunked_prefill: {}\n"
      "  mixed_batches: {}\n  gpu_memory_utilization: {}\n  activation_reserve_gb: {}\n"
      "  decode_steps: {}\n  prefill_chunk_tok: {}\n",
      d.max_num_seqs, d.max_num_batched_tokens, d.chunked_prefill, d.mixed_batches,
      Number(d.gpu_memory_utilization), Number(d.activation_reserve_gb), d.decode_steps,
      d.prefill_chunk_tok);
  if (d.sliding_kv_ratio != 1)
    out += fmt::format("  sliding_kv_ratio: {}\n", Number(d.sliding_kv_ratio));
  if (d.large_gpu_memory_gb > 0) {
    out += fmt::format(
        "  large_gpu: {{min_memory_gb: {}, except: {}, max_num_seqs: {}, "
        "max_num_batched_tokens: {}}}\n",
        Number(d.large_gpu_memory_gb), YamlList(d.large_gpu_except), d.large_gpu_max_num_seqs,
        d.large_gpu_max_num_batched_tokens);
  }
  const EngineCoefficients& c = p.coefficients;
  for (const char* section : {"kernels", "launch", "collectives", "cpu", "startup"}) {
    out += fmt::format("{}:\n", section);
    for (const Scalar& s : kScalars) {
      if (std::string_view(s.section) == section) {
        out += fmt::format("  {}: {}\n", s.key, Number(c.*(s.member)));
      }
    }
    if (std::string_view(section) == "kernels" && !c.attention_efficiency.empty()) {
      out += "  attention_efficiency: {";
      bool first = true;
      for (const auto& [kind, value] : c.attention_efficiency) {
        out += fmt::format("{}{}: {}", first ? "" : ", ", kind, Number(value));
        first = false;
      }
      out += "}\n";
    }
    if (std::string_view(section) == "launch") {
      out += fmt::format("  cuda_graph_max_tok: {}\n  graph_mixed_batches: {}\n",
                         c.cuda_graph_max_tok, c.graph_mixed_batches);
    }
  }
  const Calibration& k = p.calibration;
  out += fmt::format("calibration:\n  fitted: {}\n", k.fitted);
  if (!k.fitted_at.empty()) out += fmt::format("  fitted_at: \"{}\"\n", k.fitted_at);
  if (!k.fitted_by.empty()) out += fmt::format("  fitted_by: \"{}\"\n", k.fitted_by);
  if (!k.sources.empty()) out += fmt::format("  sources: {}\n", YamlList(k.sources));
  out += fmt::format("  points: {}\n  fit_error_pct: {}\n", k.points, Number(k.fit_error_pct));
  if (k.typical_error_pct > 0) {
    out += fmt::format("  typical_error_pct: {}\n", Number(k.typical_error_pct));
  }
  const CalibrationRange& g = k.range;
  if (k.fitted) {
    out += fmt::format(
        "  range:\n    models: {}\n    hardware: {}\n    layouts: {}\n    input_tok: [{}, {}]\n"
        "    output_tok: [{}, {}]\n    load: [{}, {}]\n",
        YamlList(g.models), YamlList(g.hardware), YamlList(g.layouts), Number(g.input_tok_min),
        Number(g.input_tok_max), Number(g.output_tok_min), Number(g.output_tok_max),
        Number(g.load_min), Number(g.load_max));
  }
  return out;
}

}  // namespace servesweep::perfmodel
