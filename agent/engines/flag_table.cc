#include "agent/engines/flag_table.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <optional>

namespace servesweep::agent {
namespace {

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

Status ReadArgv(const YAML::Node& node, const std::string& what, Argv* out) {
  if (!node.IsSequence()) {
    return Status::Error(fmt::format("expected '{}' to be a list of strings", what));
  }
  out->clear();
  for (const auto& item : node) {
    if (!item.IsScalar()) {
      return Status::Error(fmt::format("expected '{}' to hold strings only", what));
    }
    out->push_back(item.Scalar());
  }
  return Status::Ok();
}

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
          return Status::Error(
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

Status ParseFlagTable(std::string_view text, const std::string& where, FlagTable* table) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::Error(
        fmt::format("{}:{}:{}: expected a valid flag table, found a YAML error: {}", where,
                    e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  const YAML::Node& r = root;
  auto fail = [&](const Status& s) {
    return Status::Error(fmt::format("{}: {}", where, s.message()));
  };
  for (const char* key : {"engine", "version", "source", "program", "flags"}) {
    if (!r[key]) return Status::Error(fmt::format("{}: expected '{}', found none", where, key));
  }
  *table = FlagTable{};
  table->engine = r["engine"].Scalar();
  table->version = r["version"].Scalar();
  table->source = r["source"].Scalar();
  if (r["metrics"]) table->metrics = r["metrics"].Scalar();
  if (r["default_kv_transfer"]) table->default_kv_transfer = r["default_kv_transfer"].Scalar();
  if (r["reuse_connections"]) table->reuse_connections = r["reuse_connections"].as<bool>();
  if (Status s = ReadArgv(r["program"], "program", &table->program); !s.ok()) return fail(s);
  if (r["version_command"]) {
    if (Status s = ReadArgv(r["version_command"], "version_command", &table->version_command);
        !s.ok())
      return fail(s);
  }
  if (!r["flags"].IsMap()) return Status::Error(fmt::format("{}: expected 'flags' mapping", where));
  for (const auto& entry : r["flags"]) {
    Argv argv;
    if (Status s = ReadArgv(entry.second, "flags." + entry.first.Scalar(), &argv); !s.ok())
      return fail(s);
    table->flags[entry.first.Scalar()] = std::move(argv);
  }
  if (const YAML::Node roles = r["kv_roles"]) {
    for (const auto& entry : roles) table->kv_roles[entry.first.Scalar()] = entry.second.Scalar();
  }
  if (const YAML::Node env = r["pd_env"]) {
    for (const auto& entry : env) table->pd_env[entry.first.Scalar()] = entry.second.Scalar();
  }
  if (const YAML::Node router = r["router"]) {
    for (const auto& [key, out] : {std::pair<const char*, Argv*>{"program", &table->router_program},
                                   {"prefill", &table->router_prefill},
                                   {"decode", &table->router_decode}}) {
      if (!router[key]) return Status::Error(fmt::format("{}: expected 'router.{}'", where, key));
      if (Status s = ReadArgv(router[key], std::string("router.") + key, out); !s.ok())
        return fail(s);
    }
  }
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
  if (!newest) return Status::Error(fmt::format("no flag table for engine '{}'", engine));
  if (version.empty()) {
    *table = *newest;
    return Status::Ok();
  }
  if (!best) {
    std::string known;
    for (const auto& v : versions) known += (known.empty() ? "" : ", ") + v;
    return Status::Error(fmt::format(
        "engine_version '{}' of {} is older than every flag table (agent/engines/flags: {})",
        version, engine, known));
  }
  *table = *best;
  return Status::Ok();
}

}  // namespace servesweep::agent
