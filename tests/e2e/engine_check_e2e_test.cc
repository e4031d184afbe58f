// servesweep's command lines through the engines' own argument handling, with the real engines
// of scripts/install-engines.sh: vLLM 0.33.0 (+ vllm-router 0.1.17), SGLang 0.5.23
// (+ sglang-router 0.3.2) and vLLM 0.11.0, each in its cached virtual environment, without a GPU
// or weights (config-only model folders, tests/data/model-configs). Skipped, saying why, where
// those environments are absent; CI installs them (scripts/install-deps.sh --with-engines).
#include <capnp/message.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "common/ids.h"
#include "common/net.h"
#include "engines/engine_check.h"
#include "engines/flag_table.h"
#include "engines/flag_table_check.h"
#include "engines/launch_plan.h"
#include "matrix/matrix_loader.h"
#include "scraper/signal_names_check.h"
#include "testing/process_helpers.h"
#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

namespace fs = std::filesystem;
using engines::CheckVerdict;

// The engine environments: SERVESWEEP_ENGINE_ENVS (colon-separated), else the three that
// scripts/install-engines.sh makes.
std::vector<std::string> EngineEnvs(std::string* missing) {
  std::vector<std::string> wanted;
  if (const char* given = std::getenv("SERVESWEEP_ENGINE_ENVS")) {
    std::stringstream list(given);
    for (std::string dir; std::getline(list, dir, ':');) wanted.push_back(dir);
  } else {
    for (const char* name : {"vllm", "sglang", "vllm-0.11.0"}) {
      wanted.push_back(std::string("/opt/servesweep-pyengines/") + name);
    }
  }
  std::vector<std::string> found;
  for (const auto& dir : wanted) {
    if (fs::exists(dir + "/bin/python")) {
      found.push_back(dir);
    } else {
      *missing += (missing->empty() ? "" : ", ") + dir;
    }
  }
  return found;
}

// Skipped where the environments are absent; with SERVESWEEP_REQUIRE_ENGINE_ENVS=1 (.ci/run)
// that fails instead: CI must prove the command lines, not skip them after a failed install.
#define REQUIRE_ENGINE_ENVS(envs)                                                               \
  std::string missing_envs;                                                                     \
  const std::vector<std::string> envs = EngineEnvs(&missing_envs);                              \
  if (!missing_envs.empty()) {                                                                  \
    const char* required = std::getenv("SERVESWEEP_REQUIRE_ENGINE_ENVS");                       \
    if (required != nullptr && std::string(required) == "1") {                                  \
      FAIL() << "engine environments missing: " << missing_envs                                 \
             << " (SERVESWEEP_REQUIRE_ENGINE_ENVS=1; scripts/install-pyengines.sh makes them)"; \
    }                                                                                           \
    GTEST_SKIP() << "engine environments missing: " << missing_envs                             \
                 << " (scripts/install-pyengines.sh makes them; CI installs them)";             \
  }

std::string ConfigDir(const std::string& name) {
  return std::string(SERVESWEEP_SOURCE_DIR) + "/tests/data/model-configs/" + name;
}

// Every model name and path of the examples and golden layouts -> its config-only folder.
const std::map<std::string, std::string>& ModelConfigs() {
  static const std::map<std::string, std::string> configs = {
      {"meta-llama/Llama-3.1-8B-Instruct", ConfigDir("llama-3.1-8b-instruct")},
      {"llama-8b", ConfigDir("llama-3.1-8b-instruct")},
      {"llama-70b", ConfigDir("llama-3.3-70b-instruct")},
      {"/models/Llama-3.3-70B-Instruct", ConfigDir("llama-3.3-70b-instruct")},
      {"deepseek-v3", ConfigDir("deepseek-v3")},
      {"deepseek-ai/DeepSeek-V3", ConfigDir("deepseek-v3")},
      {"qwen-7b", ConfigDir("qwen2.5-7b-instruct")},
      {"Qwen/Qwen3-30B-A3B", ConfigDir("qwen3-30b-a3b")},
      {"/models/eagle3-llama-70b", ConfigDir("eagle3-llama-3.3-70b")},
      {"/models/eagle3-llama-8b", ConfigDir("eagle3-llama-3.1-8b")},
  };
  return configs;
}

engines::EngineCheckOptions CheckOptions(const std::vector<std::string>& envs) {
  engines::EngineCheckOptions options;
  options.engine_envs = envs;
  options.search_path = false;
  options.prefer_node_gpu = false;
  options.gpu_preset = "h200";
  options.env = {{"HF_HUB_OFFLINE", "1"}};
  return options;
}

struct Checked {
  std::string where;  // "title: head rank 0 [engine]"
  engines::CheckedProcess process;
  CheckVerdict verdict;
};

// Every engine process of `text`'s runs, planned as the agents would, each rank at 10.0.0.<r+1>.
void AddProcesses(const std::string& title, matrix::LoadedMatrix& loaded, std::vector<Checked>* out,
                  std::vector<std::string>* refused_before_launch) {
  for (auto original : loaded.matrix().getRuns()) {
    capnp::MallocMessageBuilder message;
    message.setRoot(original);
    auto spec = message.getRoot<schema::RunSpec>();
    engines::SubstituteModelConfigs(ModelConfigs(), spec);
    std::vector<std::string> addresses;
    for (uint32_t r = 0; r < std::max<uint32_t>(1, spec.getNodesNeeded()); ++r) {
      addresses.push_back(fmt::format("10.0.0.{}", r + 1));
    }
    for (const auto& rank :
         engines::PlanRunLaunches(spec.asReader(), addresses, 8000, "servesweep")) {
      if (!rank.planned.ok()) {
        refused_before_launch->push_back(
            fmt::format("{} rank {}: {}", title, rank.rank, rank.planned.message()));
      }
      for (auto& p : engines::ProcessesOf(rank.launch, spec.asReader())) {
        out->push_back({fmt::format("{} [{}]: rank {} [{}]", title, original.getLabel().cStr(),
                                    rank.rank, p.process.name),
                        std::move(p),
                        {}});
      }
    }
  }
}

void CheckAll(const std::vector<std::string>& envs, std::vector<Checked>* checked) {
  std::vector<engines::CheckedProcess> processes;
  for (const auto& c : *checked) processes.push_back(c.process);
  std::vector<CheckVerdict> verdicts;
  Status s = engines::CheckProcesses(processes, CheckOptions(envs), &verdicts);
  ASSERT_TRUE(s.ok()) << s.message();
  for (size_t i = 0; i < verdicts.size(); ++i) (*checked)[i].verdict = verdicts[i];
}

bool IsEngineProgram(const std::string& program) {
  return program == "vllm" || program == "sglang" || program == "vllm-router" ||
         program == "sglang-router";
}

std::string Effective(const CheckVerdict& v, const std::string& name) {
  for (const auto& [key, value] : v.effective) {
    if (key == name) return value;
  }
  return "(absent)";
}

// The examples and every golden layout (tests/golden/engine_layouts.yaml): each command line of
// vLLM, SGLang and their routers is accepted by the engine's own parser and resolution.
TEST(EngineCheck, EveryExampleAndGoldenLayoutIsAcceptedByTheEnginesOwnParsers) {
  REQUIRE_ENGINE_ENVS(envs);
  std::vector<Checked> checked;
  std::vector<std::string> refused_before_launch;
  for (const auto& entry :
       fs::directory_iterator(std::string(SERVESWEEP_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    matrix::LoadedMatrix loaded;
    Status s = matrix::LoadMatrixFile(entry.path().string(), &loaded);
    ASSERT_TRUE(s.ok()) << s.message();
    AddProcesses("examples/" + entry.path().filename().string(), loaded, &checked,
                 &refused_before_launch);
  }
  // Examples refuse nothing; golden layouts refuse on purpose (their titles say so).
  EXPECT_EQ(refused_before_launch, std::vector<std::string>{});
  refused_before_launch.clear();
  const YAML::Node layouts = YAML::Load(ReadSourceFile("tests/golden/engine_layouts.yaml"));
  for (const auto& layout : layouts) {
    matrix::LoadedMatrix loaded;
    const std::string text = "name: golden\n" + layout["matrix"].as<std::string>() +
                             "\nworkload: {input_len: 16, output_len: 16, num_requests: 4, "
                             "concurrency: 1}\n";
    Status s = matrix::ExpandMatrix("golden.yaml", text, &loaded);
    ASSERT_TRUE(s.ok()) << s.message();
    AddProcesses(layout["title"].as<std::string>(), loaded, &checked, &refused_before_launch);
  }
  for (const auto& refusal : refused_before_launch) {
    EXPECT_NE(refusal.find("refused"), std::string::npos)
        << "a golden layout refused before launch without saying so in its title: " << refusal;
  }
  const auto started = std::chrono::steady_clock::now();
  CheckAll(envs, &checked);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  size_t accepted = 0, engine_lines = 0, example_lines = 0;
  std::set<std::string> api_servers_checked;
  std::set<std::string> distinct;
  for (const auto& c : checked) {
    const std::string program = c.process.process.argv[0];
    if (!IsEngineProgram(program)) {
      EXPECT_EQ(c.verdict.outcome, CheckVerdict::Outcome::kNotChecked) << c.where;
      continue;
    }
    ++engine_lines;
    if (c.where.rfind("examples/", 0) == 0) ++example_lines;
    distinct.insert(fmt::format("{}", fmt::join(c.process.process.argv, " ")));
    if (c.verdict.ok()) {
      ++accepted;
    } else {
      ADD_FAILURE() << c.where << ": " << c.verdict.Describe() << "\n  "
                    << fmt::format("{}", fmt::join(c.process.process.argv, " "));
    }
    if (c.verdict.ok() && (program == "vllm" || program == "sglang")) {
      EXPECT_NE(Effective(c.verdict, "prefill_budget_tok"), "(absent)") << c.where;
      // The front-end processes as the engine resolves them: the flag where given, else its
      // own default (vLLM 0.33: one per DP rank; 0.11 and SGLang: one).
      const std::map<std::string, std::string> api_servers = {
          {"vllm 0.33 dp 2 behind 4 API servers", "4"},
          {"vllm 0.11 with 2 API servers", "2"},
          {"sglang 0.5.23 with 2 tokenizer workers", "2"},
          {"vllm 0.33 data parallel across 2 nodes: tp 4, dp 4, expert parallel", "4"},
          {"examples/vllm-vs-sglang.yaml", "1"}};
      for (const auto& [where, count] : api_servers) {
        if (c.where.rfind(where, 0) == 0 && c.where.find(": rank 0 ") != std::string::npos) {
          EXPECT_EQ(Effective(c.verdict, "api_servers"), count) << c.where;
          api_servers_checked.insert(where);
        }
      }
    }
    if (c.verdict.ok() && program.find("router") != std::string::npos) {
      // The routers' Prometheus listener: loopback, the run's own port (not 0.0.0.0:29000).
      bool loopback = false;
      for (const auto& [key, value] : c.verdict.resolved) {
        if (key == "prometheus_host") loopback = value == "127.0.0.1";
        if (key == "prometheus_port") {
          EXPECT_NE(value, "29000") << c.where;
        }
      }
      EXPECT_TRUE(loopback) << c.where;
    }
    for (const auto& w : c.verdict.warnings)
      std::cout << "  warning: " << c.where << ": " << w << "\n";
    for (const auto& n : c.verdict.spellings)
      std::cout << "  note: " << c.where << ": " << n << "\n";
  }
  // The matched example resolves to the same effective settings in both engines.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> example;
  for (const auto& c : checked) {
    if (c.where.rfind("examples/vllm-vs-sglang.yaml", 0) == 0) {
      example[c.process.engine] = c.verdict.effective;
    }
  }
  ASSERT_EQ(example.size(), 2u);
  EXPECT_EQ(example["vllm"], example["sglang"]);
  std::cout << fmt::format(
      "engine check: {} of {} engine and router command lines accepted ({} from the examples, {} "
      "from the golden layouts; {} distinct), {} processes without an engine check, {:.1f} s\n",
      accepted, engine_lines, example_lines, engine_lines - example_lines, distinct.size(),
      checked.size() - engine_lines, seconds);
  EXPECT_GE(engine_lines, 75u);
  EXPECT_EQ(api_servers_checked.size(), 5u);  // each layout of the list above
}

// `servesweep plan --check-engines`: an accepted and a rejected command line, with the engine's
// own message, and plan's exit code saying so.
TEST(EngineCheck, PlanCheckEnginesListsTheEnginesOwnRefusalAndAcceptsTheRest) {
  REQUIRE_ENGINE_ENVS(envs);
  Harness h("plan-check-engines");
  const std::string matrix = h.WriteFile("m.yaml", R"(name: both-ways
model: llama-8b
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
zip:
  - engine: [vllm, sglang]
    engine_flags: [["--seed", "1"], ["--speculative-algorithm", "MTP"]]
)");
  std::string args = fmt::format(
      "plan {} --check-engines --check-gpu h200 --model-config "
      "llama-8b={}",
      matrix, ConfigDir("llama-3.1-8b-instruct"));
  for (const auto& env : envs) args += " --engine-env " + env;
  std::string json;
  ASSERT_EQ(RunServesweep("--log-level error " + args + " --json", &json), 1) << json;
  const auto plan = nlohmann::json::parse(json);
  EXPECT_EQ(plan["engine_check"]["summary"],
            "engine check: 1 of 2 command line(s) accepted (1 rejected)");
  const std::string refusal = plan["runs"][1]["engine_check"][0]["verdict"];
  EXPECT_EQ(refusal.rfind("REJECTED by sglang-serve 0.5.23 (", 0), 0u) << refusal;
  EXPECT_NE(refusal.find("resolve: ValueError: Unknown speculative algorithm name: MTP"),
            std::string::npos)
      << refusal;
  EXPECT_EQ(plan["engine_check"]["accepted"], 1);
  EXPECT_EQ(plan["runs"][0]["engine_check"][0]["accepted"], true);
  EXPECT_EQ(plan["runs"][0]["engine_check"][0]["effective"]["prefill_budget_tok"], "8192");
  EXPECT_EQ(plan["runs"][1]["engine_check"][0]["accepted"], false);
}

// An environment variable for the rest of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A model whose config the check cannot load here (no weights, no network, no --model-config) is
// not the engine refusing the flags: every line says it could not be checked, with the way out,
// and plan counts them as could-not-check (its exit says the sweep is not proven), none rejected.
TEST(EngineCheck, AModelConfigTheCheckCannotLoadIsCouldNotCheckNotRejected) {
  REQUIRE_ENGINE_ENVS(envs);
  Harness h("plan-no-model-config");
  // Offline, as CI is: the hub's answer is then immediate instead of a network timeout.
  ScopedEnv offline("HF_HUB_OFFLINE", "1");
  const std::string matrix = h.WriteFile("m.yaml", R"(name: no-config
model: servesweep-test/no-such-model-7b
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
axes: {engine: [vllm, sglang]}
)");
  std::string args = fmt::format("plan {} --check-engines --check-gpu h200", matrix);
  for (const auto& env : envs) args += " --engine-env " + env;
  std::string json;
  ASSERT_EQ(RunServesweep("--log-level error " + args + " --json", &json), 1) << json;
  const auto plan = nlohmann::json::parse(json);
  EXPECT_EQ(plan["engine_check"]["summary"],
            "engine check: 0 of 2 command line(s) accepted (2 could not be checked here)")
      << json;
  EXPECT_EQ(plan["engine_check"]["rejected"], 0);
  EXPECT_EQ(plan["engine_check"]["could_not_check"], 2);
  for (const auto& run : plan["runs"]) {
    const std::string verdict = run["engine_check"][0]["verdict"];
    EXPECT_EQ(verdict.rfind("could not check: ", 0), 0u) << verdict;
    EXPECT_NE(verdict.find("could not load the model's config there"), std::string::npos)
        << verdict;
    EXPECT_NE(verdict.find("--model-config NAME=DIR"), std::string::npos) << verdict;
    EXPECT_EQ(verdict.find("REJECTED"), std::string::npos) << verdict;
  }
}

// The command lines the engines refused before the speculative mapping was fixed (issue 18):
// SGLang's EAGLE family without steps and top-k (one node, and 1P1D prefill and decode), vLLM's
// MTP name on SGLang, NEXTN with draft tokens alone, and vLLM's EAGLE3 without
// num_speculative_tokens. The same matrix spelling now resolves in both engines to the same
// draft tokens per step; the vLLM line without num_tokens is refused before launch.
TEST(EngineCheck, TheSixRefusedSpeculativeLinesAreAcceptedAfterTheFix) {
  REQUIRE_ENGINE_ENVS(envs);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sglang eagle3",
       "engine: sglang\nmodel: llama-8b\nengine_config: {speculative: {method: "
       "eagle3, model: /models/eagle3-llama-8b, num_tokens: 3}}"},
      {"sglang 1P1D eagle3",
       "engine: sglang\nmodel: llama-8b\nengine_config: {dist_port: 30000, kv_transfer: nixl, "
       "speculative: {method: eagle3, model: /models/eagle3-llama-8b, num_tokens: 3}}\nlayout: "
       "{tp: 1, prefill_instances: 1, decode_instances: 1}"},
      {"sglang mtp",
       "engine: sglang\nmodel: deepseek-v3\nlayout: {tp: 8}\nengine_config: "
       "{speculative: {method: MTP}}"},
      {"sglang nextn",
       "engine: sglang\nmodel: deepseek-v3\nlayout: {tp: 8}\nengine_config: "
       "{speculative: {method: nextn, num_tokens: 2}}"},
      {"vllm eagle3",
       "engine: vllm\nmodel: llama-8b\nengine_config: {speculative: {method: "
       "eagle3, model: /models/eagle3-llama-8b, num_tokens: 3}}"},
  };
  std::vector<Checked> checked;
  std::vector<std::string> refused;
  for (const auto& [title, keys] : cases) {
    matrix::LoadedMatrix loaded;
    ASSERT_TRUE(matrix::ExpandMatrix("s.yaml",
                                     "name: s\n" + keys +
                                         "\nworkload: {input_len: 16, output_len: 16, "
                                         "num_requests: 4, concurrency: 1}\n",
                                     &loaded)
                    .ok())
        << title;
    AddProcesses(title, loaded, &checked, &refused);
  }
  EXPECT_EQ(refused, std::vector<std::string>{});
  CheckAll(envs, &checked);
  std::map<std::string, std::string> draft_tokens;
  for (const auto& c : checked) {
    if (c.process.process.name == "router") continue;
    EXPECT_TRUE(c.verdict.ok()) << c.where << ": " << c.verdict.Describe();
    draft_tokens[c.where.substr(0, c.where.find(" ["))] =
        Effective(c.verdict, "spec_draft_tokens_per_step");
  }
  // num_tokens: 3 means three draft tokens per step in both engines.
  EXPECT_EQ(draft_tokens["sglang eagle3"], "3");
  EXPECT_EQ(draft_tokens["vllm eagle3"], "3");
  EXPECT_EQ(draft_tokens["sglang nextn"], "2");
  // Without num_tokens vLLM would refuse after the queue and the weights: refused at once.
  matrix::LoadedMatrix loaded;
  ASSERT_TRUE(matrix::ExpandMatrix("v.yaml", R"(name: v
engine: vllm
model: llama-8b
engine_config: {speculative: {method: eagle3, model: /models/eagle3-llama-8b}}
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
)",
                                   &loaded)
                  .ok());
  const Status planned =
      engines::PlanRunLaunches(loaded.matrix().getRuns()[0], {}, 8000, "servesweep")[0].planned;
  EXPECT_EQ(planned.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(planned.message().find("needs the draft tokens per step for 'eagle3'"),
            std::string::npos)
      << planned.message();
}

// The tables servesweep keeps about the engines, against the installed engines themselves: the
// option strings of every parser (flag tables) and the metric names (the /metrics mapping);
// the saved dumps of tests/data/engine-facts must be what the installed engines say
// (SERVESWEEP_UPDATE_GOLDEN=1 rewrites them).
// The cache resets the adapters plan (as the golden launch descriptions print them, which
// engines_test holds the adapters to): engine -> {path, the environment it is started with}.
struct PlannedReset {
  std::string path;
  std::set<std::string> env;  // NAME=VALUE
};
std::map<std::string, PlannedReset> PlannedCacheResets() {
  std::map<std::string, PlannedReset> out;
  std::istringstream golden(ReadSourceFile("tests/golden/engine_argv.txt"));
  std::string line, engine;
  std::set<std::string> env;
  while (std::getline(golden, line)) {
    if (const size_t at = line.find("[engine] "); at != std::string::npos) {
      std::istringstream words(line.substr(at + 9));
      std::string word;
      env.clear();
      while (words >> word && word.find('=') != std::string::npos) env.insert(word);
      engine = word;  // the first word that is not NAME=VALUE: the engine's command
    }
    const std::string marker = "cache reset: POST ";
    if (const size_t at = line.find(marker); at != std::string::npos && !engine.empty()) {
      out[engine] = {line.substr(at + marker.size()), env};
    }
  }
  return out;
}

// The installed engine defines the planned reset: POST on that path, registered under no
// condition but environment variables the launch sets (`envs.NAME` for NAME=1).
void ExpectCacheResetDefined(const nlohmann::json& facts, const PlannedReset& planned,
                             const std::string& where) {
  ASSERT_EQ(facts["route"], planned.path) << where;
  ASSERT_EQ(facts["definitions"].size(), 1u) << where << ": " << facts.dump();
  const auto& definition = facts["definitions"][0];
  const auto& methods = definition["methods"];
  EXPECT_NE(std::find(methods.begin(), methods.end(), "POST"), methods.end()) << where;
  std::vector<std::string> gates = definition["gates"].get<std::vector<std::string>>();
  if (definition.contains("attached_by")) {
    ASSERT_FALSE(definition["attached_by"].empty()) << where << ": its router is never attached";
    for (const auto& call : definition["attached_by"]) {
      for (const auto& gate : call["gates"]) gates.push_back(gate);
    }
  }
  for (const std::string& gate : gates) {
    const std::string name = gate.rfind("envs.", 0) == 0 ? gate.substr(5) : "";
    EXPECT_TRUE(!name.empty() && planned.env.count(name + "=1"))
        << where << ": " << planned.path << " is registered only when `" << gate
        << "`, which the launch does not make true";
  }
}

TEST(EngineCheck, FlagTablesMetricNamesAndCacheResetsMatchTheInstalledEngines) {
  REQUIRE_ENGINE_ENVS(envs);
  const auto planned_resets = PlannedCacheResets();
  ASSERT_TRUE(planned_resets.count("vllm") && planned_resets.count("sglang"));
  EXPECT_EQ(planned_resets.at("vllm").env.count("VLLM_SERVER_DEV_MODE=1"), 1u);
  size_t checked_resets = 0;
  const std::string facts_dir = std::string(SERVESWEEP_SOURCE_DIR) + "/tests/data/engine-facts/";
  std::map<std::string, engines::ParserOptions> parsers;  // "vllm-0.33.0", "vllm-router-0.1.17"
  std::vector<scraper::DefinedMetrics> metrics;
  for (const auto& env : envs) {
    std::string text;
    Status s = engines::EngineFacts(env + "/bin/python", ConfigDir("llama-3.1-8b-instruct"),
                                    CheckOptions(envs), &text);
    ASSERT_TRUE(s.ok()) << s.message();
    const auto facts = nlohmann::json::parse(text);
    for (const auto& [parser, table] : facts["options"].items()) {
      const std::string dist = parser.substr(
          0, parser.rfind("-serve") == std::string::npos ? parser.size() : parser.rfind("-serve"));
      const std::string name = dist + "-" + table["version"].get<std::string>();
      if (parsers.count(name)) continue;  // a router installed in two environments
      const std::string saved = facts_dir + "options-" + name + ".json";
      if (std::getenv("SERVESWEEP_UPDATE_GOLDEN")) std::ofstream(saved) << table.dump(1) << "\n";
      ASSERT_TRUE(engines::ParseParserOptions(table.dump(), name, &parsers[name]).ok());
      engines::ParserOptions kept;
      ASSERT_TRUE(
          engines::ParseParserOptions(
              ReadSourceFile("tests/data/engine-facts/options-" + name + ".json"), saved, &kept)
              .ok());
      EXPECT_EQ(kept.listed, parsers[name].listed) << saved << " is not what " << env << " says";
      EXPECT_EQ(kept.hidden, parsers[name].hidden) << saved;
    }
    for (const auto& [engine, reset] : facts["cache_reset"].items()) {
      ExpectCacheResetDefined(reset, planned_resets.at(engine),
                              engine + " " + reset["version"].get<std::string>() + " in " + env);
      ++checked_resets;
    }
    for (const auto& [engine, names] : facts["metrics"].items()) {
      const std::string name = engine + "-" + names["version"].get<std::string>();
      const std::string saved = facts_dir + "metrics-" + name + ".json";
      if (std::getenv("SERVESWEEP_UPDATE_GOLDEN")) std::ofstream(saved) << names.dump(1) << "\n";
      scraper::DefinedMetrics live, kept;
      ASSERT_TRUE(scraper::ParseDefinedMetrics(names.dump(), name, &live).ok());
      ASSERT_TRUE(
          scraper::ParseDefinedMetrics(
              ReadSourceFile("tests/data/engine-facts/metrics-" + name + ".json"), saved, &kept)
              .ok());
      EXPECT_EQ(kept.exposed, live.exposed) << saved << " is not what " << env << " says";
      metrics.push_back(std::move(live));
    }
  }
  EXPECT_EQ(scraper::CheckSignalNames(metrics), std::vector<std::string>{});
  size_t checked_tables = 0;
  for (auto path : engines::EmbeddedFlagTablePaths()) {
    engines::FlagTable table;
    ASSERT_TRUE(
        engines::ParseFlagTable(engines::EmbeddedFlagTable(path), std::string(path), &table).ok());
    if (table.engine == "llamacpp") continue;  // llama-server: flag_table_check_test.cc
    const std::string engine = table.engine + "-" + table.checked_first;
    const std::string router = table.engine + "-router-" + table.router_version;
    ASSERT_TRUE(parsers.count(engine)) << path << ": " << engine << " is not installed";
    ASSERT_TRUE(parsers.count(router)) << path << ": " << router << " is not installed";
    const engines::TableCheck check =
        engines::CrossCheckFlagTable(table, parsers[engine], &parsers[router]);
    EXPECT_TRUE(check.ok()) << path << ":\n" << fmt::format("{}", fmt::join(check.missing, "\n"));
    for (const auto& h : check.hidden) std::cout << "  hidden: " << path << ": " << h << "\n";
    for (const auto& d : check.deprecated)
      std::cout << "  deprecated: " << path << ": " << d << "\n";
    ++checked_tables;
  }
  EXPECT_EQ(checked_tables, 3u);
  EXPECT_GE(checked_resets, 3u);  // vLLM 0.33.0 and 0.11.0, SGLang 0.5.23
}

// bin/<name> of `h`: the stand-in engine with `python` on its #! line
// (tests/data/fake-python-engine).
void WriteStandInEngine(const Harness& h, const std::string& name, const std::string& python) {
  fs::create_directories(h.Path("bin"));
  const std::string path = h.Path("bin/" + name);
  std::ofstream(path) << "#!" << python << "\n" << ReadSourceFile("tests/data/fake-python-engine");
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
}

// Two sweeps of one matrix on vLLM and on SGLang, their agents checking each engine before it
// starts (the real vLLM 0.33.0 and SGLang 0.5.23 resolve the command lines; a stand-in serves):
// each record keeps the engine's own resolved settings, and `compare` reports the pair not
// matched because vLLM's step budget (8192 on the default H100) is not SGLang's
// --max-prefill-tokens (16384) under the same matrix keys.
TEST(EngineCheck, AgentsRecordTheEnginesEffectiveSettingsAndCompareMatchesOnThem) {
  REQUIRE_ENGINE_ENVS(envs);
  Harness h("effective-settings");
  WriteStandInEngine(h, "vllm", envs[0] + "/bin/python3");
  WriteStandInEngine(h, "sglang", envs[1] + "/bin/python3");
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ScopedEnv path("PATH", h.Path("bin") + ":" + old_path);
  ScopedEnv binary("SERVESWEEP_TEST_BINARY", ServesweepBinary());
  ScopedEnv offline("HF_HUB_OFFLINE", "1");
  for (const auto& [engine, version] :
       std::vector<std::pair<std::string, std::string>>{{"vllm", "0.33.0"}, {"sglang", "0.5.23"}}) {
    const std::string matrix = h.WriteFile(
        engine + ".yaml", fmt::format(R"(name: {}
engine: {}
engine_version: "{}"
model: llama-8b
max_attempts: 1
engine_config: {{model_path: {}, max_num_seqs: 16}}
workload: {{input_len: 16, output_len: 8, num_requests: 6, concurrency: 2}}
)",
                                      engine, engine, version, ConfigDir("llama-3.1-8b-instruct")));
    std::string output;
    ASSERT_EQ(RunServesweep(fmt::format("run {} --out {} --agents 1 --gpus-per-agent 1 "
                                        "--progress off",
                                        matrix, h.Path(engine)),
                            &output),
              0)
        << output;
    const auto rows = h.Query(h.Path(engine),
                              "SELECT effective_settings, effective_settings_source FROM results");
    ASSERT_EQ(rows.rows.size(), 1u);
    EXPECT_NE(rows.rows[0][0].find("max_running_requests=16"), std::string::npos)
        << rows.rows[0][0];
    EXPECT_NE(rows.rows[0][0].find(engine == "vllm" ? "prefill_budget_tok=8192"
                                                    : "prefill_budget_tok=16384"),
              std::string::npos)
        << rows.rows[0][0];
    EXPECT_NE(rows.rows[0][1].find(fmt::format("engine check: {}-serve {}", engine, version)),
              std::string::npos)
        << rows.rows[0][1];
  }
  // --include-invalid: this test is about matching on the engines' settings, not about
  // certification; a busy CI machine can make a stand-in's run client-bound (it did: reads
  // waited 2.2 ms at p99), and that refusal would come before the one judged here.
  std::string compared;
  EXPECT_EQ(RunServesweep(
                fmt::format("compare {} {} --include-invalid", h.Path("vllm"), h.Path("sglang")),
                &compared),
            1)
      << compared;
  EXPECT_NE(compared.find("refusing an unmatched comparison"), std::string::npos) << compared;
  EXPECT_NE(compared.find("concurrency 2: effective.prefill_budget_tok: '8192' vs '16384' (the "
                          "engines resolved the same matrix settings differently)"),
            std::string::npos)
      << compared;
  EXPECT_EQ(RunServesweep(fmt::format("compare {} {} --allow-mismatch --include-invalid",
                                      h.Path("vllm"), h.Path("sglang")),
                          &compared),
            0)
      << compared;
  EXPECT_NE(compared.find("NOT matched"), std::string::npos) << compared;
}

// The agent's preflight reports a KV transfer library the engine would fail to load: here nixl,
// made unimportable for the agent's environment (a package on PYTHONPATH that raises the
// ModuleNotFoundError of an absent one). The run fails before any engine starts, saying which
// package and why.
TEST(EngineCheck, AMissingNixlIsReportedByTheAgentsPreflight) {
  REQUIRE_ENGINE_ENVS(envs);
  Harness h("missing-nixl");
  WriteStandInEngine(h, "vllm", envs[0] + "/bin/python3");
  fs::create_directories(h.Path("hide/nixl"));
  h.WriteFile("hide/nixl/__init__.py", "raise ModuleNotFoundError(\"No module named 'nixl'\")\n");
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ScopedEnv path("PATH", h.Path("bin") + ":" + envs[0] + "/bin:" + old_path);
  ScopedEnv hide("PYTHONPATH", h.Path("hide"));
  ScopedEnv offline("HF_HUB_OFFLINE", "1");
  // Below Linux's ephemeral range (32768 and up), where a client socket of another test may hold
  // dist_port + 1 or + 2 for a moment (an "Address already in use" seen on a busy run).
  const int dist_port = 20000 + static_cast<int>(std::stoul(RandomHex(4), nullptr, 16) % 120) * 100;
  const std::string matrix =
      h.WriteFile("pd.yaml", fmt::format(R"(name: pd
engine: vllm
engine_version: "0.33.0"
model: llama-8b
timeout_s: 120
max_attempts: 1
engine_config: {{model_path: {}, dist_port: {}, kv_transfer: nixl}}
layout: {{tp: 1, prefill_instances: 1, decode_instances: 1}}
workload: {{input_len: 8, output_len: 4, num_requests: 4, concurrency: 2}}
)",
                                         ConfigDir("llama-3.1-8b-instruct"), dist_port));
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  std::vector<std::string> coordinator_args = {"coordinator", matrix,  "--bind",
                                               endpoint,      "--out", out};
  for (const auto& arg : h.CoordinatorKeyArgs()) coordinator_args.push_back(arg);
  const size_t coordinator = h.Start("coordinator", coordinator_args);
  std::vector<std::string> agent_args = {
      "agent", "--connect", endpoint,          "--id",       "node-a",        "--emulate-gpus",
      "2",     "--spool",   h.Path("a/spool"), "--work-dir", h.Path("a/work")};
  for (const auto& arg : h.AgentKeyArgs()) agent_args.push_back(arg);
  h.Start("agent", agent_args);
  ASSERT_TRUE(Harness::WaitFor([&] { return h.process(coordinator).Poll().has_value(); },
                               std::chrono::seconds(170)))
      << h.Log("coordinator") << h.Log("agent");
  const auto runs = h.Query(out, "SELECT status, last_error FROM runs");
  ASSERT_EQ(runs.rows.size(), 1u);
  EXPECT_EQ(runs.rows[0][0], "failed");
  const std::string& error = runs.rows[0][1];
  EXPECT_NE(error.find("engine check of [prefill0] on agent node-a: accepted by vllm-serve 0.33.0"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("but missing: nixl (import nixl._api: ModuleNotFoundError: No module "
                       "named 'nixl'), which NixlConnector needs"),
            std::string::npos)
      << error;
  // Nothing was started: no engine log.
  EXPECT_FALSE(fs::exists(h.Path("a/work")) &&
               std::any_of(fs::directory_iterator(h.Path("a/work")), fs::directory_iterator(),
                           [](const auto& e) {
                             return e.path().string().find("prefill0.log") != std::string::npos;
                           }));
}

}  // namespace
}  // namespace servesweep::testing
