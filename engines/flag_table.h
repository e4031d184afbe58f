// Engine flag tables: how one engine version spells each setting servesweep maps onto it. The
// tables are data (engines/flags/*.yaml, embedded at build time), each naming the engine
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

namespace servesweep::engines {

using Argv = std::vector<std::string>;
using Values = std::map<std::string, std::string>;

// How one KV transfer (the matrix's engine_config.kv_transfer: nixl, mooncake) is spelled for
// this engine and its router, and what each instance needs besides.
struct KvConnector {
  std::string engine_name;  // the engine's: vLLM's connector class, SGLang's backend name
  std::string router_name;  // the router's --kv-connector value ("": the router takes none)
  bool bootstrap = false;   // prefill instances serve a bootstrap port the router must be given
  std::map<std::string, std::string> env;          // every instance's environment
  std::map<std::string, std::string> prefill_env;  // prefill instances' environment
};

// The matrix's speculative decoding (method, draft model, draft tokens per step) in this engine.
struct SpeculativeMap {
  std::map<std::string, std::string> methods;  // matrix method -> the engine's name
  std::vector<std::string> needs_num_tokens;   // methods the engine refuses without a count
  // Methods whose draft tree the engine takes as steps, top-k and draft tokens, all three or
  // none (SGLang's EAGLE family); the others take draft tokens alone.
  std::vector<std::string> draft_tree;
};

struct FlagTable {
  std::string engine;   // "vllm", "sglang", "llamacpp"
  std::string version;  // the engine version the table was read from
  // The versions whose own argument parsers accepted this table's command lines (CI checks
  // them, tests/e2e/engine_check_e2e_test.cc); a version outside is refused or checked.
  std::string checked_first, checked_last;
  std::string source;   // where the flags were read (file, commit)
  std::string metrics;  // whose /metrics names the engine exposes
  Argv program;         // the command, before any flag
  Argv version_command;
  std::map<std::string, Argv> flags;
  std::map<std::string, std::string> kv_roles;       // "prefill"/"decode" -> the engine's role name
  std::map<std::string, KvConnector> kv_connectors;  // by matrix spelling ("nixl", "mooncake")
  std::string default_kv_transfer;                   // a key of kv_connectors
  // The KV side channel takes one port per TP rank (base + rank: vLLM 0.11.0's NIXL), so
  // instances' side ports are spaced by their TP size.
  bool side_port_per_rank = false;
  std::map<std::string, std::string> quantization_names;  // matrix value -> the engine's
  SpeculativeMap speculative;
  bool reuse_connections = true;  // the server keeps connections open after a streamed response
  // Front end of disaggregated layouts: program, then its kv_connector, one prefill group per
  // prefill instance (prefill_bootstrap where the connector has a bootstrap port) and one
  // decode group per decode instance.
  Argv router_program, router_kv_connector, router_prefill, router_prefill_bootstrap, router_decode;
  std::string router_version;  // the router release the router section was read from

  // Set by FindFlagTable: the asked version lies outside [checked_first, checked_last], and
  // why; such command lines run only where the engine's own check accepts them.
  std::string unchecked;

  bool Has(const std::string& key) const { return flags.count(key) > 0; }
  // The connector for a matrix kv_transfer ("" = the default), by its matrix spelling or the
  // engine's own name; nullptr (the reason in *error) when this engine has none such.
  const KvConnector* FindKvConnector(const std::string& kv_transfer, std::string* error) const;
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

// The table for `engine` at `version`: the table whose checked range holds `version`; the
// newest table when `version` is "" (the check then says which version is installed);
// otherwise the newest table before `version`, marked `unchecked` (never assumed to fit:
// plan reports it, an agent runs it only when the engine's own check accepts it). Older than
// every table is an error.
Status FindFlagTable(const std::string& engine, const std::string& version, FlagTable* table);

// Compares dotted versions numerically ("0.9.2" < "0.11.0"); non-numeric parts as text.
int CompareVersions(const std::string& a, const std::string& b);

// Embedded tables, by path ("engines/flags/vllm-0.33.0.yaml").
std::string_view EmbeddedFlagTable(std::string_view path);
std::vector<std::string_view> EmbeddedFlagTablePaths();

}  // namespace servesweep::engines
