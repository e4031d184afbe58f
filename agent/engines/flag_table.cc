#include "agent/engines/flag_table.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>

#include "common/yaml_reader.h"

namespace servesweep::agent {
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
    // caching and chunked prefill (on/off spellings; SGLang's chunk size)
    "prefix_caching_on", "prefix_caching_off", "chunked_prefill_on", "chunked_prefill_off",
    "chunked_prefill_size",
    // speculative decoding: one JSON config (vLLM) or its parts (SGLang, llama.cpp)
    "speculative", "spec_method", "spec_model", "spec_num_tokens",
    // prefill/decode disaggregation
    "kv_transfer", "pd_prefill", "pd_decode"};

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

Status ParseFlagTable(std::string_view text, const std::string& where, FlagTable* table) {
  YamlReader r(where);
  YAML::Node root;
  if (!r.Parse(text, &root)) return r.status();
  YamlMap m(r, root, "the flag table");
  FlagTable t;
  m.ReadText("engine", &t.engine, YamlMap::kRequired);
  m.ReadText("version", &t.version, YamlMap::kRequired);
  m.ReadText("source", &t.source, YamlMap::kRequired);
  m.ReadText("metrics", &t.metrics);
  m.ReadText("default_kv_transfer", &t.default_kv_transfer);
  m.ReadBool("reuse_connections", &t.reuse_connections);
  t.program = r.TextList(m.Required("program"), "program");
  if (auto v = m.Get("version_command")) t.version_command = r.TextList(v, "version_command");
  YamlMap flags = m.Section("flags", true, "flags");
  for (const auto& key : kFlagKeys) {
    if (auto v = flags.Get(key)) t.flags[key] = r.TextList(v, "flags." + key);
  }
  flags.Finish();
  // Keys that are data: the engine's role names and environment variable names.
  YamlMap kv_roles = m.Section("kv_roles", false, "kv_roles");
  for (const auto& [key, value] : kv_roles.Entries()) {
    t.kv_roles[r.Text(key, "kv_roles")] = r.Text(value, "kv_roles." + key.Scalar());
  }
  YamlMap pd_env = m.Section("pd_env", false, "pd_env");
  for (const auto& [key, value] : pd_env.Entries()) {
    t.pd_env[r.Text(key, "pd_env")] = r.Text(value, "pd_env." + key.Scalar());
  }
  if (auto router_node = m.Get("router")) {
    YamlMap router(r, router_node, "router");
    t.router_program = r.TextList(router.Required("program"), "router.program");
    t.router_prefill = r.TextList(router.Required("prefill"), "router.prefill");
    t.router_decode = r.TextList(router.Required("decode"), "router.decode");
    router.Finish();
  }
  m.Finish();
  if (r.failed()) return r.status();
  *table = std::move(t);
  return Status::Ok();
}

Status FindFlagTable(const std::string& engine, const std::string& version, FlagTable* table) {
  std::optional<FlagTable> best, newest;
  std::vector<std::string> versions;
  for (std::string_view path : EmbeddedFlagTablePaths()) {
    FlagTable candidate;
    if (Status s = ParseFlagTable(EmbeddedFlagTable(path), std::string(path), &candidate); !s.ok())
      return s;
    if (candidate.engine != engine) continue;
    versions.push_back(candidate.version);
    if (!newest || CompareVersions(candidate.version, newest->version) > 0) newest = candidate;
    if (!version.empty() && CompareVersions(candidate.version, version) <= 0 &&
        (!best || CompareVersions(candidate.version, best->version) > 0)) {
      best = candidate;
    }
  }
  if (!newest) return Status::NotFound(fmt::format("no flag table for engine '{}'", engine));
  if (version.empty()) {
    *table = *newest;
    return Status::Ok();
  }
  if (!best) {
    std::string known;
    for (const auto& v : versions) known += (known.empty() ? "" : ", ") + v;
    return Status::InvalidArgument(fmt::format(
        "engine_version '{}' of {} is older than every flag table (agent/engines/flags: {})",
        version, engine, known));
  }
  *table = *best;
  return Status::Ok();
}

}  // namespace servesweep::agent
