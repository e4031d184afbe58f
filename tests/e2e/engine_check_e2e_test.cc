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

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/engines/engine_check.h"
#include "agent/engines/flag_table.h"
#include "agent/engines/flag_table_check.h"
#include "agent/engines/launch_plan.h"
#include "agent/scraper/signal_names_check.h"
#include "common/ids.h"
#include "common/net.h"
#include "matrix/matrix_loader.h"
#include "tests/support/harness.h"
#include "testing/process_helpers.h"

namespace servesweep::testing {
namespace {

namespace fs = std::filesystem;
using agent::CheckVerdict;

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

#define REQUIRE_ENGINE_ENVS(envs)                                                             \
  std::string missing_envs;                                                                   \
  const std::vector<std::string> envs = EngineEnvs(&missing_envs);                            \
  if (!missing_envs.empty()) {                                                                \
    GTEST_SKIP() << "engine environments missing: " << missing_envs                           \
                 << " (scripts/install-engines.sh makes them; CI installs them)";            \
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

agent::EngineCheckOptions CheckOptions(const std::vector<std::string>& envs) {
  agent::EngineCheckOptions options;
  options.engine_envs = envs;
  options.search_path = false;
  options.prefer_node_gpu = false;
  options.gpu_preset = "h200";
  options.env = {{"HF_HUB_OFFLINE", "1"}};
  return options;
}

struct Checked {
  std::string where;  // "title: head rank 0 [engine]"
  agent::CheckedProcess process;
  CheckVerdict verdict;
};

// Every engine process of `text`'s runs, planned as the agents would, each rank at 10.0.0.<r+1>.
void AddProcesses(const std::string& title, matrix::LoadedMatrix& loaded,
                  std::vector<Checked>* out, std::vector<std::string>* refused_before_launch) {
  for (auto original : loaded.matrix().getRuns()) {
    capnp::MallocMessageBuilder message;
    message.setRoot(original);
    auto spec = message.getRoot<schema::RunSpec>();
    agent::SubstituteModelConfigs(ModelConfigs(), spec);
    std::vector<std::string> addresses;
    for (uint32_t r = 0; r < std::max<uint32_t>(1, spec.getNodesNeeded()); ++r) {
      addresses.push_back(fmt::format("10.0.0.{}", r + 1));
    }
    for (const auto& rank : agent::PlanRunLaunches(spec.asReader(), addresses, 8000, "servesweep")) {
      if (!rank.launch.error.empty()) {
        refused_before_launch->push_back(fmt::format("{} rank {}: {}", title, rank.rank,
                                                     rank.launch.error));
      }
      for (auto& p : agent::ProcessesOf(rank.launch, spec.asReader())) {
        out->push_back({fmt::format("{} [{}]: rank {} [{}]", title, original.getLabel().cStr(),
                                    rank.rank, p.process.name),
                        std::move(p),
                        {}});
      }
    }
  }
}

void CheckAll(const std::vector<std::string>& envs, std::vector<Checked>* checked) {
  std::vector<agent::CheckedProcess> processes;
  for (const auto& c : *checked) processes.push_back(c.process);
  std::vector<CheckVerdict> verdicts;
  Status s = agent::CheckProcesses(processes, CheckOptions(envs), &verdicts);
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
  for (const auto& entry : fs::directory_iterator(std::string(SERVESWEEP_SOURCE_DIR) + "/examples")) {
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
  size_t accepted = 0, engine_lines = 0;
  std::set<std::string> distinct;
  for (const auto& c : checked) {
    const std::string program = c.process.process.argv[0];
    if (!IsEngineProgram(program)) {
      EXPECT_EQ(c.verdict.outcome, CheckVerdict::Outcome::kNotChecked) << c.where;
      continue;
    }
    ++engine_lines;
    distinct.insert(fmt::format("{}", fmt::join(c.process.process.argv, " ")));
    if (c.verdict.ok()) {
      ++accepted;
    } else {
      ADD_FAILURE() << c.where << ": " << c.verdict.Describe() << "\n  "
                    << fmt::format("{}", fmt::join(c.process.process.argv, " "));
    }
    if (c.verdict.ok() && (program == "vllm" || program == "sglang")) {
      EXPECT_NE(Effective(c.verdict, "prefill_budget_tok"), "(absent)") << c.where;
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
    for (const auto& w : c.verdict.warnings) std::cout << "  warning: " << c.where << ": " << w << "\n";
    for (const auto& n : c.verdict.spellings) std::cout << "  note: " << c.where << ": " << n << "\n";
  }
  std::cout << fmt::format(
      "engine check: {} of {} engine and router command lines accepted ({} distinct), {} "
      "processes without an engine check, {:.1f} s\n",
      accepted, engine_lines, distinct.size(), checked.size() - engine_lines, seconds);
  EXPECT_GE(engine_lines, 75u);
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
  std::string args = fmt::format("plan {} --check-engines --check-gpu h200 --model-config "
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

// The command lines the engines refused before the speculative mapping was fixed (issue 18):
// SGLang's EAGLE family without steps and top-k (one node, and 1P1D prefill and decode), vLLM's
// MTP name on SGLang, NEXTN with draft tokens alone, and vLLM's EAGLE3 without
// num_speculative_tokens. The same matrix spelling now resolves in both engines to the same
// draft tokens per step; the vLLM line without num_tokens is refused before launch.
TEST(EngineCheck, TheSixRefusedSpeculativeLinesAreAcceptedAfterTheFix) {
  REQUIRE_ENGINE_ENVS(envs);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sglang eagle3", "engine: sglang\nmodel: llama-8b\nengine_config: {speculative: {method: "
                        "eagle3, model: /models/eagle3-llama-8b, num_tokens: 3}}"},
      {"sglang 1P1D eagle3",
       "engine: sglang\nmodel: llama-8b\nengine_config: {dist_port: 30000, kv_transfer: nixl, "
       "speculative: {method: eagle3, model: /models/eagle3-llama-8b, num_tokens: 3}}\nlayout: "
       "{tp: 1, prefill_instances: 1, decode_instances: 1}"},
      {"sglang mtp", "engine: sglang\nmodel: deepseek-v3\nlayout: {tp: 8}\nengine_config: "
                     "{speculative: {method: MTP}}"},
      {"sglang nextn", "engine: sglang\nmodel: deepseek-v3\nlayout: {tp: 8}\nengine_config: "
                       "{speculative: {method: nextn, num_tokens: 2}}"},
      {"vllm eagle3", "engine: vllm\nmodel: llama-8b\nengine_config: {speculative: {method: "
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
  const auto launch =
      agent::PlanRunLaunches(loaded.matrix().getRuns()[0], {}, 8000, "servesweep")[0].launch;
  EXPECT_TRUE(launch.error_permanent);
  EXPECT_NE(launch.error.find("needs the draft tokens per step for 'eagle3'"), std::string::npos)
      << launch.error;
}

// The tables servesweep keeps about the engines, against the installed engines themselves: the
// option strings of every parser (flag tables) and the metric names (the /metrics mapping);
// the saved dumps of tests/data/engine-facts must be what the installed engines say
// (SERVESWEEP_UPDATE_GOLDEN=1 rewrites them).
TEST(EngineCheck, FlagTablesAndMetricNamesMatchTheInstalledEngines) {
  REQUIRE_ENGINE_ENVS(envs);
  const std::string facts_dir = std::string(SERVESWEEP_SOURCE_DIR) + "/tests/data/engine-facts/";
  std::map<std::string, agent::ParserOptions> parsers;  // "vllm-0.33.0", "vllm-router-0.1.17"
  std::vector<agent::DefinedMetrics> metrics;
  for (const auto& env : envs) {
    std::string text;
    Status s = agent::EngineFacts(env + "/bin/python", ConfigDir("llama-3.1-8b-instruct"),
                                  CheckOptions(envs), &text);
    ASSERT_TRUE(s.ok()) << s.message();
    const auto facts = nlohmann::json::parse(text);
    for (const auto& [parser, table] : facts["options"].items()) {
      const std::string dist = parser.substr(0, parser.rfind("-serve") == std::string::npos
                                                    ? parser.size()
                                                    : parser.rfind("-serve"));
      const std::string name = dist + "-" + table["version"].get<std::string>();
      if (parsers.count(name)) continue;  // a router installed in two environments
      const std::string saved = facts_dir + "options-" + name + ".json";
      if (std::getenv("SERVESWEEP_UPDATE_GOLDEN")) std::ofstream(saved) << table.dump(1) << "\n";
      ASSERT_TRUE(agent::ParseParserOptions(table.dump(), name, &parsers[name]).ok());
      agent::ParserOptions kept;
      ASSERT_TRUE(agent::ParseParserOptions(ReadSourceFile("tests/data/engine-facts/options-" +
                                                           name + ".json"),
                                            saved, &kept)
                      .ok());
      EXPECT_EQ(kept.listed, parsers[name].listed) << saved << " is not what " << env << " says";
      EXPECT_EQ(kept.hidden, parsers[name].hidden) << saved;
    }
    for (const auto& [engine, names] : facts["metrics"].items()) {
      const std::string name = engine + "-" + names["version"].get<std::string>();
      const std::string saved = facts_dir + "metrics-" + name + ".json";
      if (std::getenv("SERVESWEEP_UPDATE_GOLDEN")) std::ofstream(saved) << names.dump(1) << "\n";
      agent::DefinedMetrics live, kept;
      ASSERT_TRUE(agent::ParseDefinedMetrics(names.dump(), name, &live).ok());
      ASSERT_TRUE(agent::ParseDefinedMetrics(ReadSourceFile("tests/data/engine-facts/metrics-" +
                                                            name + ".json"),
                                             saved, &kept)
                      .ok());
      EXPECT_EQ(kept.exposed, live.exposed) << saved << " is not what " << env << " says";
      metrics.push_back(std::move(live));
    }
  }
  EXPECT_EQ(agent::CheckSignalNames(metrics), std::vector<std::string>{});
  size_t checked_tables = 0;
  for (auto path : agent::EmbeddedFlagTablePaths()) {
    agent::FlagTable table;
    ASSERT_TRUE(agent::ParseFlagTable(agent::EmbeddedFlagTable(path), std::string(path), &table)
                    .ok());
    if (table.engine == "llamacpp") continue;  // llama-server: flag_table_check_test.cc
    const std::string engine = table.engine + "-" + table.checked_first;
    const std::string router = table.engine + "-router-" + table.router_version;
    ASSERT_TRUE(parsers.count(engine)) << path << ": " << engine << " is not installed";
    ASSERT_TRUE(parsers.count(router)) << path << ": " << router << " is not installed";
    const agent::TableCheck check =
        agent::CrossCheckFlagTable(table, parsers[engine], &parsers[router]);
    EXPECT_TRUE(check.ok()) << path << ":\n" << fmt::format("{}", fmt::join(check.missing, "\n"));
    for (const auto& h : check.hidden) std::cout << "  hidden: " << path << ": " << h << "\n";
    for (const auto& d : check.deprecated) std::cout << "  deprecated: " << path << ": " << d << "\n";
    ++checked_tables;
  }
  EXPECT_EQ(checked_tables, 3u);
}

}  // namespace
}  // namespace servesweep::testing
