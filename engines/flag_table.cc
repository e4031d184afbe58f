#include "engines/flag_table.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>

#include "common/yaml_reader.h"

namespace servesweep::engines {
namespace {

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The settings servesweep spells through a table: the contract between the tables (data) and the
// adapters (which ask for these keys). A table key outside it is a typo, refused with a
// did-you-mean; an adapter asking for a key outside it is a bug (ArgvBuilder says so).
const std::vector<std::string> kFlagKeys = {
    // where the engine serves, and under which model name
    "served_model_name", "host", "port",
    // parallel layout, one node
    "tp", "pp", "dp", "ep", "dp_attention",
    // several nodes: vLLM's data parallel (dp_*) and headless workers, or one TP/PP group
    // (nnodes, node_rank, master_*); SGLang's dist_init_addr
    "dp_local", "dp_address", "dp_rpc_port", "dp_start_rank", "headless", "nnodes", "node_rank",
    "master_addr", "master_port", "dist_init_addr",
    // precision, batching, memory, context
    "quantization", "kv_cache_dtype", "max_num_seqs", "max_batched_tokens", "context_len",
    "threads", "gpu_memory_fraction",
    // front-end processes (vLLM's API servers, SGLang's tokenizer workers)
    "api_server_count",
    // caching and chunked prefill (on/off spellings; SGLang's chunk size)
    "prefix_caching_on", "prefix_caching_off", "chunked_prefill_on", "chunked_prefill_off",
    "chunked_prefill_size",
    // one engine kept across runs: what its cache reset needs (llama.cpp's slot actions need a
    // save path; its host-RAM prompt cache, which no endpoint clears, off)
    "slot_save_path", "prompt_cache_ram_off",
    // speculative decoding: one JSON config (vLLM) or its parts (SGLang, llama.cpp); SGLang's
    // draft tree (steps, top-k, draft tokens: together or not at all)
    "speculative", "spec_method", "spec_model", "spec_num_tokens", "spec_num_steps",
    "spec_eagle_topk", "spec_num_draft_tokens",
    // prefill/decode disaggregation
    "kv_transfer", "pd_prefill", "pd_decode",
    // multi-LoRA: the enable flag, the adapters' flag and each adapter's spelling (or one
    // comma-joined list of files), the slots
    "lora_on", "lora_modules", "lora_module", "lora_paths", "max_loras", "max_lora_rank",
    "max_cpu_loras", "lora_backend"};

std::vector<std::string> SplitVersion(const std::string& version) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : version) {
    if (c == '.' || c == '-' || c == '+') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  parts.push_back(part);
  return parts;
}

}  // namespace

Status FillPlaceholders(const std::string& pattern, const Values& values, std::string* out) {
  out->clear();
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] == '{') {
      size_t end = i + 1;
      while (end < pattern.size() && IsIdentifierChar(pattern[end])) ++end;
      if (end > i + 1 && end < pattern.size() && pattern[end] == '}') {
        const std::string name = pattern.substr(i + 1, end - i - 1);
        auto it = values.find(name);
        if (it == values.end()) {
          return Status::InvalidArgument(
              fmt::format("placeholder {{{}}} in '{}' has no value for this run", name, pattern));
        }
        *out += it->second;
        i = end + 1;
        continue;
      }
    }
    *out += pattern[i++];
  }
  return Status::Ok();
}

Status FillArgv(const Argv& pattern, const Values& values, Argv* out) {
  for (const auto& item : pattern) {
    std::string filled;
    if (Status s = FillPlaceholders(item, values, &filled); !s.ok()) return s;
    out->push_back(std::move(filled));
  }
  return Status::Ok();
}

int CompareVersions(const std::string& a, const std::string& b) {
  const auto pa = SplitVersion(a), pb = SplitVersion(b);
  for (size_t i = 0; i < std::max(pa.size(), pb.size()); ++i) {
    const std::string x = i < pa.size() ? pa[i] : "0";
    const std::string y = i < pb.size() ? pb[i] : "0";
    const bool nx = !x.empty() && std::all_of(x.begin(), x.end(), ::isdigit);
    const bool ny = !y.empty() && std::all_of(y.begin(), y.end(), ::isdigit);
    if (nx && ny) {
      const unsigned long long vx = std::stoull(x), vy = std::stoull(y);
      if (vx != vy) return vx < vy ? -1 : 1;
    } else if (x != y) {
      return x < y ? -1 : 1;
    }
  }
  return 0;
}

const std::vector<std::string>& FlagKeys() { return kFlagKeys; }

namespace {

std::map<std::string, std::string> TextMap(YamlReader& r, YamlMap& parent, const std::string& key,
                                           const std::string& where) {
  std::map<std::string, std::string> out;
  YamlMap m = parent.Section(key, false, where);
  for (const auto& [name, value] : m.Entries()) {
    out[r.Text(name, where)] = r.Text(value, where + "." + name.Scalar());
  }
  return out;
}

void ReadKvConnectors(YamlReader& r, YamlMap& m, FlagTable* t) {
  YamlMap connectors = m.Section("kv_connectors", false, "kv_connectors");
  for (const auto& [key, value] : connectors.Entries()) {
    const std::string name = r.Text(key, "kv_connectors");
    const std::string where = "kv_connectors." + name;
    YamlMap c(r, value, where);
    KvConnector connector;
    c.ReadText("engine", &connector.engine_name, YamlMap::kRequired);
    c.ReadText("router", &connector.router_name);
    c.ReadBool("bootstrap", &connector.bootstrap);
    connector.env = TextMap(r, c, "env", where + ".env");
    connector.prefill_env = TextMap(r, c, "prefill_env", where + ".prefill_env");
    c.Finish();
    t->kv_connectors[name] = std::move(connector);
  }
}

void ReadSpeculative(YamlReader& r, YamlMap& m, FlagTable* t) {
  YamlMap spec = m.Section("speculative", false, "speculative");
  t->speculative.methods = TextMap(r, spec, "methods", "speculative.methods");
  if (auto v = spec.Get("needs_num_tokens")) {
    t->speculative.needs_num_tokens = r.TextList(v, "speculative.needs_num_tokens");
  }
  if (auto v = spec.Get("draft_tree")) {
    t->speculative.draft_tree = r.TextList(v, "speculative.draft_tree");
  }
  spec.Finish();
}

}  // namespace

const KvConnector* FlagTable::FindKvConnector(const std::string& kv_transfer,
                                              std::string* error) const {
  const std::string& wanted = kv_transfer.empty() ? default_kv_transfer : kv_transfer;
  std::string known;
  for (const auto& [name, connector] : kv_connectors) {
    if (name == wanted || connector.engine_name == wanted) return &connector;
    known += (known.empty() ? "" : ", ") + name + " (" + connector.engine_name + ")";
  }
  *error = fmt::format(
      "engine_config.kv_transfer '{}' has no counterpart in {} {}: expected one of {} "
      "(engines/flags, read from {})",
      wanted, engine, version, known.empty() ? "none" : known, source);
  return nullptr;
}

Status ParseFlagTable(std::string_view text, const std::string& where, FlagTable* table) {
  YamlDocument document(where, text, "the flag table");
  if (!document.ok()) return document.status();
  YamlReader& r = document.reader();
  YamlMap& m = document.root();
  FlagTable t;
  m.ReadText("engine", &t.engine, YamlMap::kRequired);
  m.ReadText("version", &t.version, YamlMap::kRequired);
  if (auto v = m.Get("checked_versions")) {
    const auto range = r.TextList(v, "checked_versions");
    if (r.ok() && (range.size() != 2 || CompareVersions(range[0], range[1]) > 0)) {
      r.Fail(v, fmt::format("expected 'checked_versions' to be [first, last] with first <= last, "
                            "found {} item(s)",
                            range.size()));
    } else if (r.ok()) {
      t.checked_first = range[0];
      t.checked_last = range[1];
    }
  } else {
    t.checked_first = t.checked_last = t.version;
  }
  m.ReadText("source", &t.source, YamlMap::kRequired);
  m.ReadText("metrics", &t.metrics);
  m.ReadText("default_kv_transfer", &t.default_kv_transfer);
  m.ReadBool("reuse_connections", &t.reuse_connections);
  m.ReadBool("side_port_per_rank", &t.side_port_per_rank);
  t.program = r.TextList(m.Required("program"), "program");
  if (auto v = m.Get("version_command")) t.version_command = r.TextList(v, "version_command");
  YamlMap flags = m.Section("flags", true, "flags");
  for (const auto& key : kFlagKeys) {
    if (auto v = flags.Get(key)) t.flags[key] = r.TextList(v, "flags." + key);
  }
  flags.Finish();
  // Keys that are data: the engine's role names, connectors, method and quantization names.
  t.kv_roles = TextMap(r, m, "kv_roles", "kv_roles");
  t.quantization_names = TextMap(r, m, "quantization_names", "quantization_names");
  ReadKvConnectors(r, m, &t);
  ReadSpeculative(r, m, &t);
  if (auto router_node = m.Get("router")) {
    YamlMap router(r, router_node, "router");
    t.router_program = r.TextList(router.Required("program"), "router.program");
    if (auto v = router.Get("kv_connector")) {
      t.router_kv_connector = r.TextList(v, "router.kv_connector");
    }
    t.router_prefill = r.TextList(router.Required("prefill"), "router.prefill");
    if (auto v = router.Get("prefill_bootstrap")) {
      t.router_prefill_bootstrap = r.TextList(v, "router.prefill_bootstrap");
    }
    t.router_decode = r.TextList(router.Required("decode"), "router.decode");
    router.ReadText("version", &t.router_version);
    router.Finish();
  }
  m.Finish();
  if (r.ok() && !t.default_kv_transfer.empty() && !t.kv_connectors.count(t.default_kv_transfer)) {
    r.Fail(m.Get("default_kv_transfer"),
           fmt::format("expected 'default_kv_transfer' to name one of kv_connectors, found '{}'",
                       t.default_kv_transfer));
  }
  if (r.failed()) return r.status();
  *table = std::move(t);
  return Status::Ok();
}

Status FindFlagTable(const std::string& engine, const std::string& version, FlagTable* table) {
  std::optional<FlagTable> exact, older, newest;
  std::vector<std::string> ranges;
  for (std::string_view path : EmbeddedFlagTablePaths()) {
    FlagTable candidate;
    if (Status s = ParseFlagTable(EmbeddedFlagTable(path), std::string(path), &candidate); !s.ok())
      return s;
    if (candidate.engine != engine) continue;
    ranges.push_back(candidate.checked_first == candidate.checked_last
                         ? candidate.checked_first
                         : candidate.checked_first + " through " + candidate.checked_last);
    if (!newest || CompareVersions(candidate.version, newest->version) > 0) newest = candidate;
    if (version.empty()) continue;
    if (CompareVersions(candidate.checked_first, version) <= 0 &&
        CompareVersions(version, candidate.checked_last) <= 0) {
      exact = candidate;
    } else if (CompareVersions(candidate.checked_first, version) <= 0 &&
               (!older || CompareVersions(candidate.version, older->version) > 0)) {
      older = candidate;
    }
  }
  if (!newest) return Status::NotFound(fmt::format("no flag table for engine '{}'", engine));
  std::string known;
  for (const auto& range : ranges) known += (known.empty() ? "" : "; ") + range;
  if (version.empty()) {
    *table = *newest;
  } else if (exact) {
    *table = *exact;
  } else if (older) {
    *table = *older;
    table->unchecked = fmt::format(
        "{} {} is outside every flag table's checked versions ({}): the {} table is used "
        "unchecked, so only {} {}'s own check may let it start (plan --check-engines where it "
        "is installed; agents check before starting it); or pin engine_version to a checked "
        "version, or add a table (engines/flags)",
        engine, version, known, older->version, engine, version);
  } else {
    return Status::InvalidArgument(
        fmt::format("engine_version '{}' of {} is older than every flag table "
                    "(engines/flags, checked versions: {})",
                    version, engine, known));
  }
  return Status::Ok();
}

}  // namespace servesweep::engines
