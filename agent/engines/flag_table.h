// Engine flag tables: how one engine version spells each setting servesweep maps onto it. The
// tables are data (agent/engines/flags/*.yaml, embedded at build time), each naming the engine
// source it was read from; adapters decide which keys a run needs and fill their placeholders.
// Flags drift between releases, so a new release is a new table, not new code.
//
// Thread-safety: tables are immutable values; the embedded texts are read-only.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace servesweep::agent {

using Argv = std::vector<std::string>;
using Values = std::map<std::string, std::string>;

struct FlagTable {
  std::string engine;   // "vllm", "sglang", "llamacpp"
  std::string version;  // the engine version the table was read from; applies from it on
  std::string source;   // where the flags were read (file, commit)
  std::string metrics;  // whose /metrics names the engine exposes
  Argv program;         // the command, before any flag
  Argv version_command;
  std::map<std::string, Argv> flags;
  std::map<std::string, std::string> kv_roles;  // "prefill"/"decode" -> the engine's role name
  std::string default_kv_transfer;
  bool reuse_connections = true;  // the server keeps connections open after a streamed response
  std::map<std::string, std::string> pd_env;           // environment of each disaggregated instance
  Argv router_program, router_prefill, router_decode;  // front end of disaggregated layouts

  bool Has(const std::string& key) const { return flags.count(key) > 0; }
};

// Replaces each {name} of `pattern` with values[name]. A {name} not in `values` is an error;
// braces not around an identifier (JSON) are kept.
Status FillPlaceholders(const std::string& pattern, const Values& values, std::string* out);
Status FillArgv(const Argv& pattern, const Values& values, Argv* out);

// The keys a table's `flags:` may hold (the settings adapters ask for), in one list.
const std::vector<std::string>& FlagKeys();

// Parses one table (`where` names it in errors: file:line:column, unknown keys with a
// did-you-mean).
Status ParseFlagTable(std::string_view text, const std::string& where, FlagTable* table);

// The table for `engine` at `version`: the newest table whose version is <= `version`, or the
// newest of all when `version` is "" (or older than every table, which is an error).
Status FindFlagTable(const std::string& engine, const std::string& version, FlagTable* table);

// Compares dotted versions numerically ("0.9.2" < "0.11.0"); non-numeric parts as text.
int CompareVersions(const std::string& a, const std::string& b);

// Embedded tables, by path ("agent/engines/flags/vllm-0.33.0.yaml").
std::string_view EmbeddedFlagTable(std::string_view path);
std::vector<std::string_view> EmbeddedFlagTablePaths();

}  // namespace servesweep::agent
