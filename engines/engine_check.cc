#include "engines/engine_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/ids.h"
#include "common/subprocess.h"
#include "engines/flag_table.h"

namespace servesweep::engines {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Each kind's name in the checker's cases and the distribution whose version it reports.
struct KindInfo {
  CheckKind kind;
  const char* name;
  const char* distribution;
};
constexpr KindInfo kKinds[] = {
    {CheckKind::kVllmServe, "vllm-serve", "vllm"},
    {CheckKind::kSglangServe, "sglang-serve", "sglang"},
    {CheckKind::kVllmRouter, "vllm-router", "vllm-router"},
    {CheckKind::kSglangRouter, "sglang-router", "sglang-router"},
};

const KindInfo& InfoOf(CheckKind kind) {
  for (const auto& info : kKinds) {
    if (info.kind == kind) return info;
  }
  static const KindInfo none{CheckKind::kNone, "", ""};
  return none;
}
const char* DistributionOf(CheckKind kind) { return InfoOf(kind).distribution; }
const char* KindName(CheckKind kind) { return InfoOf(kind).name; }

bool IsPython(const std::string& program) {
  return fs::path(program).filename().string().rfind("python", 0) == 0;
}

bool Executable(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// Where `program` would be found: the given environments first (DIR/bin/P, DIR/P), then PATH.
std::vector<std::string> Candidates(const std::string& program, const EngineCheckOptions& options) {
  std::vector<std::string> out;
  auto add = [&out](const fs::path& path) {
    if (Executable(path) && std::find(out.begin(), out.end(), path.string()) == out.end()) {
      out.push_back(path.string());
    }
  };
  if (program.find('/') != std::string::npos) {
    add(program);
    return out;
  }
  for (const auto& env : options.engine_envs) {
    add(fs::path(env) / "bin" / program);
    add(fs::path(env) / program);
  }
  if (options.search_path) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "");
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (!dir.empty()) add(fs::path(dir) / program);
    }
  }
  return out;
}

// The Python interpreter a console script runs with (its #! line; pip writes a /bin/sh
// trampoline with `'''exec' "PYTHON" "$0" "$@"` for interpreter paths too long for #!).
std::string InterpreterOf(const std::string& program_path, std::string* why) {
  if (IsPython(program_path)) return program_path;
  std::ifstream in(program_path, std::ios::binary);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  if (first.rfind("#!", 0) != 0) {
    *why = fmt::format("{} is not a Python program (no #! line): nothing to check it with",
                       program_path);
    return "";
  }
  std::istringstream words(first.substr(2));
  std::string interpreter, argument;
  words >> interpreter >> argument;
  if (fs::path(interpreter).filename() == "env" && !argument.empty()) interpreter = argument;
  if (interpreter == "/bin/sh" && second.rfind("'''exec' ", 0) == 0) {
    const size_t open = second.find('"'), close = second.find('"', open + 1);
    if (open != std::string::npos && close != std::string::npos) {
      interpreter = second.substr(open + 1, close - open - 1);
    }
  }
  if (!IsPython(interpreter)) {
    *why = fmt::format("{} runs with {}, not Python: nothing to check it with", program_path,
                       interpreter);
    return "";
  }
  return interpreter;
}

// The checker's files, written once per binary into a folder named by their content.
Status DeployChecker(const EngineCheckOptions& options, std::string* script) {
  std::string all;
  for (auto path : EmbeddedCheckScriptPaths()) all += std::string(EmbeddedCheckScript(path));
  const fs::path base =
      options.work_dir.empty() ? fs::temp_directory_path() : fs::path(options.work_dir);
  const fs::path dir = base / fmt::format("servesweep-engine-check-{}-{}",
                                          StableHashHex(all).substr(0, 12), ::getuid());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status::Internal(
        fmt::format("engine check: cannot create {}: {}", dir.string(), ec.message()));
  }
  for (auto path : EmbeddedCheckScriptPaths()) {
    const fs::path target = dir / fs::path(std::string(path)).filename();
    if (fs::exists(target, ec)) continue;
    const fs::path partial = target.string() + fmt::format(".{}.tmp", ::getpid());
    std::ofstream(partial, std::ios::binary) << EmbeddedCheckScript(path);
    fs::rename(partial, target, ec);
    if (ec) {
      return Status::Internal(
          fmt::format("engine check: cannot write {}: {}", target.string(), ec.message()));
    }
  }
  *script = (dir / "engine_check.py").string();
  return Status::Ok();
}

std::vector<std::string> Texts(const Json& value) {
  std::vector<std::string> out;
  if (value.is_array()) {
    for (const auto& item : value)
      out.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> Pairs(const Json& value) {
  std::vector<std::pair<std::string, std::string>> out;
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      out.emplace_back(key, item.is_string() ? item.get<std::string>()
                            : item.is_null() ? "n/a"
                                             : item.dump());
    }
  }
  return out;
}

// Runs the checker once with `mode` (e.g. {"--versions"}) and returns its output lines.
Status RunChecker(const std::string& python, const std::string& script,
                  const std::vector<std::string>& mode, const EngineCheckOptions& options,
                  std::vector<Json>* lines) {
  static std::atomic<uint64_t> counter{0};
  const fs::path dir = fs::path(script).parent_path();
  const std::string stem = fmt::format("run-{}-{}", ::getpid(), counter++);
  const std::string out_path = (dir / (stem + ".jsonl")).string();
  const std::string log_path = (dir / (stem + ".log")).string();
  SpawnOptions spawn;
  spawn.argv = {python, script};
  spawn.argv.insert(spawn.argv.end(), mode.begin(), mode.end());
  spawn.argv.insert(spawn.argv.end(), {"--out", out_path});
  spawn.env = options.env;
  spawn.log_path = log_path;
  ChildProcess child;
  if (Status s = ChildProcess::Spawn(spawn, &child); !s.ok()) return s;
  const auto status =
      child.Wait(std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000)));
  if (!status) {
    child.Stop(std::chrono::seconds(2));
    return Status::DeadlineExceeded(
        fmt::format("the engine check with {} took longer than {:.0f} s (log: {})", python,
                    options.timeout_s, log_path));
  }
  std::ifstream in(out_path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    Json parsed = Json::parse(line, nullptr, false);
    if (!parsed.is_discarded()) lines->push_back(std::move(parsed));
  }
  std::error_code ec;
  fs::remove(out_path, ec);
  if (*status != 0 || lines->empty()) {
    return Status::Internal(fmt::format("the engine check with {} ended with {}: {}", python,
                                        DescribeExit(*status), TailOfFile(log_path, 5)));
  }
  fs::remove(log_path, ec);
  return Status::Ok();
}

struct Environment {
  std::string python;
  std::map<std::string, std::string> versions;  // distribution -> version
  std::string error;                            // the interpreter did not answer
};

std::mutex cache_mutex;
std::map<std::string, Environment> environments;      // by interpreter, guarded by cache_mutex
std::map<std::string, CheckVerdict> verdicts_by_key;  // guarded by cache_mutex

Environment EnvironmentOf(const std::string& python, const std::string& script,
                          const EngineCheckOptions& options) {
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (auto it = environments.find(python); it != environments.end()) return it->second;
  }
  Environment env;
  env.python = python;
  std::vector<Json> lines;
  if (Status s = RunChecker(python, script, {"--versions"}, options, &lines); !s.ok()) {
    env.error = s.message();
  } else {
    for (const auto& [name, version] : lines[0]["environment"]["versions"].items()) {
      env.versions[name] = version.get<std::string>();
    }
  }
  std::lock_guard<std::mutex> lock(cache_mutex);
  environments[python] = env;
  return env;
}

CheckVerdict NotChecked(CheckVerdict::Outcome outcome, std::string why) {
  CheckVerdict v;
  v.outcome = outcome;
  v.message = std::move(why);
  return v;
}

CheckVerdict VerdictOf(const Json& line, const std::string& python) {
  CheckVerdict v;
  v.installed_version = line.value("version", "");
  v.checker = fmt::format("{} {} ({})", line.value("kind", ""), v.installed_version, python);
  v.stage = line.value("stage", "");
  if (line.contains("error") && line["error"].is_string()) v.message = line["error"];
  v.warnings = Texts(line["warnings"]);
  v.spellings = Texts(line["spellings"]);
  v.missing_packages = Texts(line["missing_packages"]);
  v.effective = Pairs(line["effective"]);
  v.resolved = Pairs(line["resolved"]);
  v.seconds = line.value("seconds", 0.0);
  if (line.value("not_installed", false)) {
    v.outcome = CheckVerdict::Outcome::kUnavailable;
  } else if (line.value("model_unavailable", false)) {
    // The model's files could not be read there: the engine never judged the flags.
    v.outcome = CheckVerdict::Outcome::kUnavailable;
    v.message = fmt::format(
        "{} could not load the model's config there ({}: {}); give its config folder with "
        "--model-config NAME=DIR, or check on a node that has the weights",
        v.checker, v.stage, v.message);
  } else if (line.value("accepted", false)) {
    v.outcome = CheckVerdict::Outcome::kAccepted;
  } else if (!v.missing_packages.empty()) {
    v.outcome = CheckVerdict::Outcome::kMissingPackages;
    v.message = "missing: " + fmt::format("{}", fmt::join(v.missing_packages, "; "));
  } else {
    v.outcome = CheckVerdict::Outcome::kRejected;
  }
  return v;
}

}  // namespace

CheckKind CheckKindOf(const std::vector<std::string>& argv, std::vector<std::string>* args,
                      std::string* entry) {
  args->clear();
  entry->clear();
  if (argv.empty()) return CheckKind::kNone;
  const std::string program = fs::path(argv[0]).filename().string();
  auto rest = [&](size_t from) {
    args->assign(argv.begin() + std::min(from, argv.size()), argv.end());
  };
  auto second = [&](const char* word) { return argv.size() > 1 && argv[1] == word; };
  if (program == "vllm" && second("serve")) {
    rest(2);
    *entry = "vllm serve";
    return CheckKind::kVllmServe;
  }
  if (program == "vllm-router") {
    rest(1);
    *entry = "vllm-router";
    return CheckKind::kVllmRouter;
  }
  if (program == "sglang" && second("serve")) {
    rest(2);
    *entry = "sglang serve";
    return CheckKind::kSglangServe;
  }
  if ((program == "sglang-router" || program == "smg" || program == "amg") && second("launch")) {
    rest(2);
    *entry = program + " launch";
    return CheckKind::kSglangRouter;
  }
  if (IsPython(program) && argv.size() > 2 && argv[1] == "-m") {
    rest(3);
    *entry = "python -m " + argv[2];
    if (argv[2] == "sglang.launch_server") return CheckKind::kSglangServe;
    if (argv[2] == "sglang_router.launch_router") return CheckKind::kSglangRouter;
    if (argv[2] == "vllm_router.launch_router") return CheckKind::kVllmRouter;
  }
  args->clear();
  entry->clear();
  return CheckKind::kNone;
}

std::string CheckVerdict::Describe() const {
  switch (outcome) {
    case Outcome::kAccepted:
      return fmt::format(
          "accepted by {}{}", checker,
          spellings.empty() ? "" : fmt::format("; note: {}", fmt::join(spellings, "; ")));
    case Outcome::kRejected:
      return fmt::format("REJECTED by {}, {}: {}", checker, stage, message);
    case Outcome::kMissingPackages:
      return fmt::format("accepted by {}, but {}", checker, message);
    case Outcome::kNotChecked:
      return "not checked: " + message;
    case Outcome::kUnavailable:
      return "could not check: " + message;
  }
  return message;
}

Status CheckProcesses(const std::vector<CheckedProcess>& processes,
                      const EngineCheckOptions& options, std::vector<CheckVerdict>* verdicts) {
  verdicts->assign(processes.size(), CheckVerdict{});
  std::string script;
  bool deployed = false;
  struct Case {
    size_t index;
    std::string key;
    Json json;
  };
  std::map<std::string, std::vector<Case>> by_python;
  Json gpu = {{"prefer_node", options.prefer_node_gpu}, {"count", options.gpu_count}};
  if (!options.gpu_preset.empty()) gpu["preset"] = options.gpu_preset;
  for (size_t i = 0; i < processes.size(); ++i) {
    const CheckedProcess& p = processes[i];
    std::vector<std::string> args;
    std::string entry;
    const CheckKind kind = CheckKindOf(p.process.argv, &args, &entry);
    auto& verdict = (*verdicts)[i];
    if (kind == CheckKind::kNone) {
      verdict = NotChecked(CheckVerdict::Outcome::kNotChecked,
                           fmt::format("{} has no engine check (vLLM, SGLang and their routers "
                                       "have)",
                                       p.process.argv.empty() ? "(empty)" : p.process.argv[0]));
      continue;
    }
    if (!deployed) {
      if (Status s = DeployChecker(options, &script); !s.ok()) return s;
      deployed = true;
    }
    // The interpreter that would run it, of the environment holding the asked version.
    const bool serve = kind == CheckKind::kVllmServe || kind == CheckKind::kSglangServe;
    std::string chosen, found, why_not;
    for (const auto& program : Candidates(p.process.argv[0], options)) {
      std::string why;
      const std::string python = InterpreterOf(program, &why);
      if (python.empty()) {
        if (why_not.empty()) why_not = why;
        continue;
      }
      const Environment env = EnvironmentOf(python, script, options);
      auto it = env.versions.find(DistributionOf(kind));
      if (!env.error.empty() || it == env.versions.end()) {
        found +=
            fmt::format("{}{} has no {}", found.empty() ? "" : "; ", python, DistributionOf(kind));
        continue;
      }
      found += fmt::format("{}{} {} at {}", found.empty() ? "" : "; ", DistributionOf(kind),
                           it->second, python);
      if (serve && !p.engine_version.empty() &&
          CompareVersions(it->second, p.engine_version) != 0) {
        continue;
      }
      chosen = python;
      break;
    }
    if (chosen.empty()) {
      if (found.empty() && !why_not.empty()) {
        verdict = NotChecked(CheckVerdict::Outcome::kNotChecked, why_not);
      } else {
        verdict = NotChecked(
            CheckVerdict::Outcome::kUnavailable,
            fmt::format("{}{} is not installed where it would run ({})", DistributionOf(kind),
                        serve && !p.engine_version.empty() ? " " + p.engine_version : "",
                        found.empty() ? fmt::format("no {} on PATH{}", p.process.argv[0],
                                                    options.engine_envs.empty()
                                                        ? ""
                                                        : " or in the engine environments")
                                      : "found " + found));
      }
      continue;
    }
    Json env = Json::object();
    for (const auto& [name, value] : p.process.env) env[name] = value;
    Json json = {{"kind", KindName(kind)}, {"entry", entry}, {"args", args}, {"env", env}};
    const std::string key = chosen + "\n" + json.dump() + "\n" + gpu.dump();
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      if (auto it = verdicts_by_key.find(key); it != verdicts_by_key.end()) {
        verdict = it->second;
        continue;
      }
    }
    json["id"] = std::to_string(i);
    by_python[chosen].push_back({i, key, std::move(json)});
  }
  for (auto& [python, cases] : by_python) {
    // Identical command lines (repeats, load points) are checked once.
    Json request = {{"gpu", gpu}, {"cases", Json::array()}};
    std::map<std::string, size_t> first_of_key;
    for (const auto& c : cases) {
      if (first_of_key.emplace(c.key, c.index).second) request["cases"].push_back(c.json);
    }
    const std::string cases_path =
        fs::path(script).parent_path() /
        fmt::format("cases-{}-{}.json", ::getpid(), StableHashHex(request.dump()).substr(0, 8));
    std::ofstream(cases_path) << request.dump();
    std::vector<Json> lines;
    Status s = RunChecker(python, script, {"--cases", cases_path}, options, &lines);
    std::error_code ec;
    fs::remove(cases_path, ec);
    std::map<std::string, CheckVerdict> by_id;
    for (const auto& line : lines) {
      if (line.contains("id")) by_id[line["id"].get<std::string>()] = VerdictOf(line, python);
    }
    for (const auto& c : cases) {
      auto& verdict = (*verdicts)[c.index];
      auto it = by_id.find(std::to_string(first_of_key[c.key]));
      if (it == by_id.end()) {
        verdict = NotChecked(CheckVerdict::Outcome::kUnavailable,
                             s.ok() ? "the engine check gave no answer for it" : s.message());
        continue;
      }
      verdict = it->second;
      if (verdict.outcome != CheckVerdict::Outcome::kUnavailable) {
        std::lock_guard<std::mutex> lock(cache_mutex);
        verdicts_by_key[c.key] = verdict;
      }
    }
  }
  return Status::Ok();
}

Status EngineFacts(const std::string& python, const std::string& model_dir,
                   const EngineCheckOptions& options, std::string* json) {
  std::string script;
  if (Status s = DeployChecker(options, &script); !s.ok()) return s;
  std::vector<Json> lines;
  if (Status s = RunChecker(python, script, {"--facts", model_dir}, options, &lines); !s.ok()) {
    return s;
  }
  *json = lines[0].dump(1);
  return Status::Ok();
}

std::vector<CheckedProcess> ProcessesOf(const EngineLaunch& launch, schema::RunSpec::Reader spec) {
  std::vector<CheckedProcess> out;
  for (const auto& process : launch.processes) {
    out.push_back({spec.getEngine().cStr(), spec.getEngineVersion().cStr(), process});
  }
  return out;
}

void SubstituteModelConfigs(const std::map<std::string, std::string>& configs,
                            schema::RunSpec::Builder spec) {
  auto config = spec.getEngineConfig();
  const std::string model_path =
      config.getModelPath().size() ? config.getModelPath().cStr() : spec.getModel().cStr();
  if (auto it = configs.find(model_path); it != configs.end()) {
    config.setModelPath(it->second);
  } else if (auto by_name = configs.find(spec.getModel().cStr()); by_name != configs.end()) {
    config.setModelPath(by_name->second);
  }
  if (auto it = configs.find(config.getSpecModel().cStr()); it != configs.end()) {
    config.setSpecModel(it->second);
  }
}

void FillEffectiveSettings(const std::vector<std::pair<std::string, CheckVerdict>>& by_process,
                           schema::BenchmarkRecord::Builder record) {
  std::vector<std::pair<std::string, const CheckVerdict*>> engines;
  std::string source;
  for (const auto& [name, verdict] : by_process) {
    if (verdict.ok() && !verdict.effective.empty()) {
      engines.emplace_back(name, &verdict);
      if (source.find(verdict.checker) == std::string::npos) {
        source += (source.empty() ? "" : "; ") + verdict.checker;
      }
    }
  }
  size_t count = 0;
  for (const auto& [name, verdict] : engines) count += verdict->effective.size();
  auto list = record.initEffectiveSettings(static_cast<unsigned>(count));
  unsigned i = 0;
  for (const auto& [name, verdict] : engines) {
    for (const auto& [setting, value] : verdict->effective) {
      list[i].setName(setting);
      list[i].setValue(value);
      list[i].setProcess(name);
      ++i;
    }
  }
  record.setEffectiveSettingsSource(
      engines.empty() ? std::string("n/a: no engine check ran before the engine started")
                      : fmt::format("engine check: {}", source));
}

}  // namespace servesweep::engines
