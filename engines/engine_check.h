// The engines' own argument handling over servesweep's command lines, before anything starts:
// every process of a launch that vLLM, SGLang or their routers would run is handed, in the
// Python environment that would run it (the interpreter of its program: `vllm`, `sglang`,
// `vllm-router`, `sglang-router` found on PATH or in the given environments), to the engine's
// own parser and configuration resolution by engines/check/engine_check.py (embedded in
// the binary). No weights are loaded and no GPU is touched: the engines are told the GPU's facts
// (the node's nvidia-smi, else a preset). What it cannot see: kernels, memory, the network,
// anything decided once the weights are on the GPU (docs/engines.md#engine-check).
//
// Thread-safety: CheckProcesses may be called from several threads; its cache of verdicts
// (keyed by interpreter, command line, environment and GPU) takes a lock.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engines/engine_adapter.h"
#include "schema/result.capnp.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::engines {

// Which of the engines' own handlers a command line goes to.
enum class CheckKind { kNone, kVllmServe, kSglangServe, kVllmRouter, kSglangRouter };
// The kind of `argv` and the arguments after its program and subcommand; `entry` names how it
// was started ("vllm serve", "python -m sglang.launch_server").
CheckKind CheckKindOf(const std::vector<std::string>& argv, std::vector<std::string>* args,
                      std::string* entry);

struct CheckedProcess {
  std::string engine;          // the run's engine ("vllm", "sglang")
  std::string engine_version;  // the version the run asks for ("" = whichever is installed)
  EngineProcess process;
};

struct CheckVerdict {
  enum class Outcome {
    kAccepted,         // the engine's own handling accepted it, and what it needs imports
    kRejected,         // the engine refused it (message: the engine's own words)
    kMissingPackages,  // accepted, but a library it loads at start does not import there
    kNotChecked,       // no engine check applies (llama.cpp, a template, a shell script)
    kUnavailable,      // the engine is not installed there (at that version), timed out, or
                       // could not load the model's config there (no weights, no network)
  };
  Outcome outcome = Outcome::kNotChecked;
  std::string checker;                 // "vllm-serve 0.33.0 (/opt/.../bin/python3)"
  std::string installed_version;       // the engine's (or router's) version there
  std::string stage;                   // where it stopped: parse, validate, engine config, resolve
  std::string message;                 // the refusal, or why it was not checked
  std::vector<std::string> warnings;   // the engine's own warnings
  std::vector<std::string> spellings;  // hidden aliases, abbreviations, deprecations
  std::vector<std::string> missing_packages;  // "nixl (import nixl._api: ...)"
  // The engine's resolved settings in servesweep's names (docs/engines.md#effective-settings)
  // and in its own; empty unless accepted.
  std::vector<std::pair<std::string, std::string>> effective, resolved;
  double seconds = 0;  // this case's share of the check (the import is shared by a batch)

  bool ok() const { return outcome == Outcome::kAccepted; }
  bool refused() const {
    return outcome == Outcome::kRejected || outcome == Outcome::kMissingPackages;
  }
  std::string Describe() const;  // one line: "accepted by vllm 0.33.0 ..." / "REJECTED ..."
};

struct EngineCheckOptions {
  // Python environments (virtual environments or bin folders) to look for the programs in,
  // before PATH; the one holding the run's engine_version wins.
  std::vector<std::string> engine_envs;
  bool search_path = true;
  // The GPU the engines are told of: the node's nvidia-smi when `prefer_node_gpu` and it
  // answers, else `gpu_preset` (h100, h200, b200, a100, l4; "" = h100) times `gpu_count`.
  bool prefer_node_gpu = true;
  std::string gpu_preset;
  uint32_t gpu_count = 8;
  std::vector<std::pair<std::string, std::string>> env;  // added to the checker's environment
  double timeout_s = 600;  // per environment's batch (imports take ~10 s, the first ~40 s)
  std::string work_dir;    // where the checker's files and logs go ("" = a temp folder)
};

// Checks every process (batched: one child per Python environment, the imports paid once).
// *verdicts has one entry per process, in order. Fails only when the check itself cannot run
// (cannot write its files); an engine that is missing or refuses is a verdict.
Status CheckProcesses(const std::vector<CheckedProcess>& processes,
                      const EngineCheckOptions& options, std::vector<CheckVerdict>* verdicts);

// The processes of `launch` to check for `spec`.
std::vector<CheckedProcess> ProcessesOf(const EngineLaunch& launch, schema::RunSpec::Reader spec);

// `spec` with its model, engine_config.model_path and speculative draft model replaced by the
// folder `configs` gives for their name or path (config-only folders, no weights: checks made
// away from the node, e.g. plan --check-engines in CI).
void SubstituteModelConfigs(const std::map<std::string, std::string>& configs,
                            schema::RunSpec::Builder spec);

// The effective settings of the checked engine processes (routers have none) into the record,
// each with its process's name, and effectiveSettingsSource saying which check they came from.
void FillEffectiveSettings(const std::vector<std::pair<std::string, CheckVerdict>>& by_process,
                           schema::BenchmarkRecord::Builder record);

// What the engines of one Python environment define, for servesweep's tables to be checked
// against (engine_check.py --facts): {"environment", "options": {parser: option table},
// "metrics": {engine: metric names}}, the metrics' collectors built for the model whose
// config.json is in `model_dir`.
Status EngineFacts(const std::string& python, const std::string& model_dir,
                   const EngineCheckOptions& options, std::string* json);

// The checker's embedded files (engines/check/*.py), by path.
std::string_view EmbeddedCheckScript(std::string_view path);
std::vector<std::string_view> EmbeddedCheckScriptPaths();

}  // namespace servesweep::engines
