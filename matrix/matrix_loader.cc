#include "matrix/matrix_loader.h"

#include <capnp/serialize.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/ids.h"
#include "common/yaml_reader.h"
#include "matrix/engine_configuration.h"
#include "matrix/feasibility.h"
#include "matrix/run_conditions.h"
#include "matrix/run_keys.h"
#include "matrix/workload_expansion.h"
#include "workload/load_settings.h"

namespace servesweep::matrix {
namespace {

constexpr size_t kMaxRuns = 100000;

// One axis of the product: the keys it sets (with where each is written), and for each
// position one value per key. A zip group is one axis whose positions set several keys.
struct Axis {
  std::vector<std::string> keys;
  std::vector<YAML::Node> key_nodes;
  std::vector<std::vector<YAML::Node>> positions;
};

// A short label of the axis values that make this run differ from its siblings.
std::string AxisLabel(const std::string& axis, const YAML::Node& value) {
  if (value.IsScalar()) return fmt::format("{}={}", axis, value.Scalar());
  if (value.IsMap()) {
    std::string out;
    for (const auto& entry : value) {
      std::string rendered = entry.second.IsScalar() ? entry.second.Scalar() : "...";
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", entry.first.Scalar(), rendered);
    }
    return out;
  }
  return axis + "=...";
}

// The expansion of one matrix, in the phases ExpandMatrix runs: the matrix's own keys, the axes,
// the conditions, the combinations they keep, and each run (keys, workload, checks, id).
class Expansion {
 public:
  Expansion(const std::string& path, const std::string& text, LoadedMatrix* out)
      : path_(path), text_(text), out_(out), reader_(path) {}

  Status Run() {
    if (!reader_.Parse(text_, &root_)) return reader_.status();
    YamlMap top(reader_, root_, "the matrix");
    if (reader_.failed()) return reader_.status();
    ReadMatrixKeys(top);
    ReadAxes(top);
    ReadConditionsAndCompare(top);
    // Every key the top level may hold is registered by now (the run keys by one scratch read).
    top.Finish();
    if (reader_.failed()) return reader_.status();
    if (Status s = SelectCombinations(top); !s.ok()) return s;
    if (!ExpandRuns(top)) return reader_.status();
    return CheckBaselineSelectsRuns();
  }

 private:
  void ReadMatrixKeys(YamlMap& top);
  void ReadAxes(YamlMap& top);
  void ReadZipGroups(const YAML::Node& zip);
  // Whether `key` is a run key (an unknown one is an error at its node, with a did-you-mean).
  void CheckAxisKey(const YAML::Node& key, const YAML::Node& first_value,
                    const std::string& section);
  void ReadConditionsAndCompare(YamlMap& top);
  Status SelectCombinations(YamlMap& top);
  bool ExpandRuns(YamlMap& top);
  Status CheckBaselineSelectsRuns();
  // Applies the top-level run keys and one combination of axis values; returns its label.
  std::string ApplyCombination(YamlMap& top, size_t combo, schema::RunSpec::Builder spec);
  // The checks a whole run must pass: the load settings' rules (the load generator's own,
  // workload/load_settings.h) and what the matrix alone knows (engine, model, layout).
  void CheckRunIsRunnable(schema::RunSpec::Reader spec);
  // Where a key that breaks a rule is written: the axis setting it, workload.KEY, KEY, or the
  // matrix's top.
  YAML::Node WhereIs(const std::string& key) const;
  void AssignRunId(schema::RunSpec::Builder spec, size_t index);

  const std::string& path_;
  const std::string& text_;
  LoadedMatrix* out_;
  YamlReader reader_;
  YAML::Node root_;
  std::string name_ = "sweep";
  uint32_t repeats_ = 1;
  bool probes_enabled_ = false, exclude_unhealthy_ = false;
  uint32_t probe_repeats_ = 5;
  LocalCluster cluster_;
  std::vector<Axis> axes_;
  std::vector<Condition> keep_if_, drop_if_, baseline_;
  std::vector<std::string> compare_axes_;
  size_t combinations_ = 1;
  std::vector<size_t> kept_;
};

void Expansion::ReadMatrixKeys(YamlMap& top) {
  if (auto v = top.Get("name")) {
    name_ = reader_.Text(v, "name");
    // The name prefixes run ids, which name spool files: keep it to file-name characters.
    const bool valid = !name_.empty() && std::all_of(name_.begin(), name_.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    if (!valid) {
      reader_.Fail(
          v, fmt::format("expected 'name' of letters, digits, '.', '_' or '-', found '{}'", name_));
    }
  }
  if (auto v = top.Get("repeats")) repeats_ = reader_.Uint(v, "repeats", 1);
  if (auto v = top.Get("local")) {
    YamlMap local(reader_, v, "local");
    if (auto n = local.Get("agents")) out_->local.agents = reader_.Uint(n, "agents", 1);
    if (auto n = local.Get("gpus_per_agent")) {
      out_->local.gpus_per_agent = reader_.Uint(n, "gpus_per_agent", 1);
    }
    local.Finish();
  }
  if (auto v = top.Get("probes")) {
    YamlMap probes(reader_, v, "probes");
    if (auto n = probes.Get("enabled")) probes_enabled_ = reader_.Bool(n, "enabled");
    if (auto n = probes.Get("exclude_unhealthy")) {
      exclude_unhealthy_ = reader_.Bool(n, "exclude_unhealthy");
    }
    if (auto n = probes.Get("repeats")) probe_repeats_ = reader_.Uint(n, "repeats", 1);
    probes.Finish();
  }
  cluster_ = out_->local;
  if (auto v = top.Get("cluster")) {
    YamlMap c(reader_, v, "cluster");
    if (auto n = c.Get("nodes")) cluster_.agents = reader_.Uint(n, "nodes", 1);
    if (auto n = c.Get("gpus_per_node"))
      cluster_.gpus_per_agent = reader_.Uint(n, "gpus_per_node", 1);
    c.Finish();
  }
  out_->cluster = cluster_;
  out_->cluster_declared = top.Get("cluster") || top.Get("local");
  // `servesweep search`'s section (search/search_spec.h reads it); the runs do not depend on it.
  top.Get("search");
  // The run keys of the top level, read once into a scratch spec: registered, so that
  // top.Finish() knows them, and checked before any combination.
  capnp::MallocMessageBuilder scratch;
  ReadRunKeys(top, path_, scratch.initRoot<schema::RunSpec>());
}

void Expansion::CheckAxisKey(const YAML::Node& key, const YAML::Node& first_value,
                             const std::string& section) {
  capnp::MallocMessageBuilder scratch;
  YamlMap entry(reader_, key, first_value, section);
  ReadRunKeys(entry, path_, scratch.initRoot<schema::RunSpec>());
  entry.Finish();
}

// `axes:` each a non-empty list; the runs are their cartesian product, first axis slowest.
void Expansion::ReadAxes(YamlMap& top) {
  if (auto node = top.Get("axes")) {
    YamlMap axes(reader_, node, "axes");
    for (const auto& [key, values] : axes.Entries()) {
      if (!values.IsSequence() || values.size() == 0) {
        reader_.Fail(values, fmt::format("expected axis '{}' to be a non-empty list, found {}",
                                         key.Scalar(), DescribeYamlNode(values)));
        continue;
      }
      CheckAxisKey(key, values[0], "axes");
      Axis axis;
      axis.keys = {key.Scalar()};
      axis.key_nodes = {key};
      for (const auto& value : values) axis.positions.push_back({value});
      axes_.push_back(std::move(axis));
    }
  }
  if (auto zip = top.Get("zip")) ReadZipGroups(zip);
}

// `zip:` a list of groups; each group maps run keys to lists of one common length, and its
// i-th position sets every key to its i-th value (e.g. an engine with its own flags).
void Expansion::ReadZipGroups(const YAML::Node& zip) {
  if (!zip.IsSequence()) {
    return reader_.Fail(zip, fmt::format("expected 'zip' to be a list of groups (mappings of keys "
                                         "to lists of equal length), found {}",
                                         DescribeYamlNode(zip)));
  }
  for (const auto& group_node : zip) {
    YamlMap group(reader_, group_node, "a zip group");
    if (reader_.failed()) return;
    Axis axis;
    for (const auto& [key, values] : group.Entries()) {
      if (!values.IsSequence() || values.size() == 0) {
        return reader_.Fail(values, fmt::format("expected zip key '{}' to be a non-empty list, "
                                                "found {}",
                                                key.Scalar(), DescribeYamlNode(values)));
      }
      CheckAxisKey(key, values[0], "a zip group");
      if (reader_.failed()) return;
      if (!axis.keys.empty() && values.size() != axis.positions.size()) {
        return reader_.Fail(
            values, fmt::format("expected zip key '{}' to list {} values (as '{}' "
                                "does), found {}",
                                key.Scalar(), axis.positions.size(), axis.keys[0], values.size()));
      }
      if (axis.keys.empty()) axis.positions.resize(values.size());
      axis.keys.push_back(key.Scalar());
      axis.key_nodes.push_back(key);
      for (size_t i = 0; i < values.size(); ++i) axis.positions[i].push_back(values[i]);
    }
    if (axis.keys.empty()) {
      return reader_.Fail(group_node, "expected a zip group to name at least one key, found none");
    }
    axes_.push_back(std::move(axis));
  }
}

// `where`, `exclude`, `baseline` and `compare: [engine]` (the axes a comparison group varies;
// runs equal in every other axis form one group in the report).
void Expansion::ReadConditionsAndCompare(YamlMap& top) {
  keep_if_ = ReadConditions(top, "where");
  drop_if_ = ReadConditions(top, "exclude");
  baseline_ = ReadConditions(top, "baseline");
  const YAML::Node compare = top.Get("compare");
  if (!compare || reader_.failed()) return;
  std::vector<std::string> known;
  for (const auto& axis : axes_) known.insert(known.end(), axis.keys.begin(), axis.keys.end());
  const std::vector<YAML::Node> items =
      compare.IsSequence() ? std::vector<YAML::Node>(compare.begin(), compare.end())
                           : std::vector<YAML::Node>{compare};
  for (const auto& item : items) {
    const std::string key = reader_.Text(item, "compare");
    if (reader_.failed()) return;
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string expected;
      for (const auto& k : known) expected += (expected.empty() ? "" : ", ") + k;
      return reader_.Fail(item, fmt::format("expected 'compare' to name an axis of this matrix "
                                            "({}), found '{}'",
                                            expected.empty() ? "it has none" : expected, key));
    }
    compare_axes_.push_back(key);
  }
}

std::string Expansion::ApplyCombination(YamlMap& top, size_t combo, schema::RunSpec::Builder spec) {
  ReadRunKeys(top, path_, spec);
  // Decompose the combination index, last axis fastest.
  std::vector<size_t> choice(axes_.size());
  for (size_t a = axes_.size(), rest = combo; a-- > 0;) {
    choice[a] = rest % axes_[a].positions.size();
    rest /= axes_[a].positions.size();
  }
  std::string label, group;
  for (size_t a = 0; a < axes_.size(); ++a) {
    const auto& values = axes_[a].positions[choice[a]];
    // A zip group moves its keys together: when one of them is compared, so are the others.
    const bool compared =
        std::any_of(axes_[a].keys.begin(), axes_[a].keys.end(), [&](const std::string& key) {
          return std::find(compare_axes_.begin(), compare_axes_.end(), key) != compare_axes_.end();
        });
    for (size_t k = 0; k < axes_[a].keys.size(); ++k) {
      YamlMap entry(reader_, axes_[a].key_nodes[k], values[k], "axes");
      ReadRunKeys(entry, path_, spec);
      const std::string part = AxisLabel(axes_[a].keys[k], values[k]);
      label += (label.empty() ? "" : " ") + part;
      if (!compared) group += (group.empty() ? "" : " ") + part;
    }
  }
  if (!compare_axes_.empty()) spec.setCompareGroup(group.empty() ? "all" : group);
  return label;
}

// The combinations `where` keeps and `exclude` does not drop (judged before traces expand).
Status Expansion::SelectCombinations(YamlMap& top) {
  for (const auto& axis : axes_) combinations_ *= axis.positions.size();
  if (combinations_ * repeats_ > kMaxRuns) {
    return Status::InvalidArgument(
        fmt::format("{}: expected at most {} runs, found {} (axes x repeats)", path_, kMaxRuns,
                    combinations_ * repeats_));
  }
  for (size_t combo = 0; combo < combinations_; ++combo) {
    capnp::MallocMessageBuilder scratch;
    auto spec = scratch.initRoot<schema::RunSpec>();
    ApplyCombination(top, combo, spec);
    if (reader_.failed()) return reader_.status();
    const auto lookup = RunVariables(spec.asReader(), cluster_);
    if (AllHold(reader_, keep_if_, lookup, true) && !AnyHolds(reader_, drop_if_, lookup)) {
      kept_.push_back(combo);
    }
    if (reader_.failed()) return reader_.status();
  }
  if (kept_.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: expected at least one run, found none left after 'where'/'exclude' "
                    "({} combinations)",
                    path_, combinations_));
  }
  return Status::Ok();
}

bool Expansion::ExpandRuns(YamlMap& top) {
  auto matrix = out_->message.initRoot<schema::Matrix>();
  matrix.setName(name_);
  matrix.setSourcePath(path_);
  matrix.setSourceHash(StableHashHex(text_));
  auto probes = matrix.initProbes();
  probes.setEnabled(probes_enabled_);
  probes.setExcludeUnhealthy(exclude_unhealthy_);
  probes.setRepeats(probe_repeats_);
  auto compare = matrix.initCompareAxes(static_cast<unsigned>(compare_axes_.size()));
  for (size_t i = 0; i < compare_axes_.size(); ++i) compare.set(i, compare_axes_[i]);
  auto runs = matrix.initRuns(static_cast<unsigned>(kept_.size() * repeats_));
  out_->text = text_;
  WorkloadExpander expander(reader_);
  const YAML::Node prompts_where = WhereIs("prompts");
  const YAML::Node hit_rate_where = WhereIs("prefix_hit_rate");
  const YAML::Node lora_where = WhereIs("lora");
  for (size_t k = 0; k < kept_.size(); ++k) {
    for (uint32_t repeat = 0; repeat < repeats_; ++repeat) {
      const size_t index = k * repeats_ + repeat;
      auto spec = runs[index];
      spec.setSweepName(name_);
      spec.setIndex(static_cast<uint32_t>(index));
      spec.setRepeat(repeat);
      std::string label = ApplyCombination(top, kept_[k], spec);
      if (repeats_ > 1) label += fmt::format(" repeat={}", repeat);
      spec.setLabel(label.empty() ? "default" : label);
      expander.Expand(root_, prompts_where, hit_rate_where, lora_where, spec);
      CheckRunIsRunnable(spec.asReader());
      if (reader_.failed()) return false;
      const auto layout = spec.getLayout().asReader();
      spec.setGpusNeeded(GpusForLayout(layout));
      if (layout.getGpusPerNode() > 0) {
        spec.setNodesNeeded((spec.getGpusNeeded() + layout.getGpusPerNode() - 1) /
                            layout.getGpusPerNode());
      }
      AssignRunId(spec, index);
      spec.setEngineConfiguration(EngineConfigurationOf(spec.asReader()));
      // Marked after the id: choosing another baseline re-runs nothing.
      if (!baseline_.empty()) {
        spec.setBaseline(
            AllHold(reader_, baseline_, RunVariables(spec.asReader(), cluster_), true));
        if (reader_.failed()) return false;
      }
    }
  }
  return true;
}

// The run id hashes the run's conditions, so an edited matrix never reuses stale results.
void Expansion::AssignRunId(schema::RunSpec::Builder spec, size_t index) {
  capnp::MallocMessageBuilder scratch;
  scratch.setRoot(spec.asReader());
  auto words = capnp::messageToFlatArray(scratch);
  auto bytes = words.asChars();
  const std::string hash = StableHashHex(std::string_view(bytes.begin(), bytes.size()));
  spec.setRunId(fmt::format("{}-{:04}-{}", name_, index, hash.substr(0, 8)));
}

Status Expansion::CheckBaselineSelectsRuns() {
  if (baseline_.empty()) return Status::Ok();
  for (auto run : out_->message.getRoot<schema::Matrix>().getRuns()) {
    if (run.getBaseline()) return Status::Ok();
  }
  return Status::InvalidArgument(
      fmt::format("{}: expected 'baseline' to select at least one run, found none", path_));
}

YAML::Node Expansion::WhereIs(const std::string& key) const {
  for (const auto& axis : axes_) {
    for (size_t k = 0; k < axis.keys.size(); ++k) {
      if (axis.keys[k] == key) return axis.key_nodes[k];
    }
  }
  // Through const nodes: a lookup must not insert the key (a missing one is undefined).
  const YAML::Node& root = root_;
  if (!root.IsMap()) return root_;
  const YAML::Node workload = root["workload"];
  if (workload.IsDefined() && workload.IsMap()) {
    const YAML::Node value = workload[key];
    if (value.IsDefined()) return value;
  }
  const YAML::Node value = root[key];
  return value.IsDefined() ? value : root_;
}

void Expansion::CheckRunIsRunnable(schema::RunSpec::Reader spec) {
  if (reader_.failed()) return;
  if (spec.getEngine().size() == 0) {
    return reader_.Fail(root_, "expected 'engine' (e.g. engine: sim), found none");
  }
  if (spec.getModel().size() == 0) {
    return reader_.Fail(root_, "expected 'model' (the served model name), found none");
  }
  // The rules of the load itself live with the load settings, which the agent checks again.
  std::string key;
  if (Status s = workload::ValidateLoadSettings(
          workload::LoadSettingsFor(spec, "http://the-engine"), &key);
      !s.ok()) {
    return reader_.Fail(WhereIs(key), s.message());
  }
  const auto layout = spec.getLayout();
  const auto config = spec.getEngineConfig();
  if (spec.getEngine() == "external" && config.getBaseUrl().size() == 0) {
    return reader_.Fail(WhereIs("engine"),
                        "expected 'engine_config.base_url' for engine: external, found none");
  }
  if (spec.getEngine() == "template" && config.getCommand().size() == 0) {
    return reader_.Fail(WhereIs("engine"),
                        "expected 'engine_config.command' (argv with {placeholders}) for engine: "
                        "template, found none");
  }
  if (layout.getDpAttention() && layout.getTp() % layout.getDp() != 0) {
    return reader_.Fail(WhereIs("layout"),
                        fmt::format("expected dp_attention groups to split tp evenly, found tp={} "
                                    "dp={}",
                                    layout.getTp(), layout.getDp()));
  }
  if ((layout.getPrefillInstances() == 0) != (layout.getDecodeInstances() == 0)) {
    return reader_.Fail(WhereIs("layout"),
                        fmt::format("expected both prefill_instances and decode_instances for a "
                                    "disaggregated layout, found {} and {}",
                                    layout.getPrefillInstances(), layout.getDecodeInstances()));
  }
}

}  // namespace

Status ExpandMatrix(const std::string& path, const std::string& text, LoadedMatrix* out) {
  return Expansion(path, text, out).Run();
}

Status LoadMatrixFile(const std::string& path, LoadedMatrix* out) {
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound(fmt::format("{}: expected a readable matrix file, found none", path));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ExpandMatrix(path, buffer.str(), out);
}

}  // namespace servesweep::matrix
