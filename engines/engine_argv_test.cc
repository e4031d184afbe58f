// Golden tests of the exact processes (argv and environment) the engine adapters start, for a
// table of layouts on one node, several nodes and disaggregated, per role and rank. The expected
// text is tests/golden/engine_argv.txt; SERVESWEEP_UPDATE_GOLDEN=1 rewrites it (then review the
// diff against the engines' own argument parsers named in engines/flags/).
#include <capnp/message.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "engines/engine_adapter.h"
#include "engines/flag_table.h"
#include "engines/launch_plan.h"
#include "engines/launch_values.h"
#include "matrix/matrix_loader.h"
#include "testing/process_helpers.h"

namespace servesweep::engines {
namespace {

struct Case {
  std::string title;
  std::string matrix;  // run keys; the workload is added
};

// tests/golden/engine_layouts.yaml: the layouts, shared with the engines' own check in CI.
const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> out;
    const YAML::Node root = YAML::Load(testing::ReadSourceFile("tests/golden/engine_layouts.yaml"));
    for (const auto& item : root) {
      out.push_back({item["title"].as<std::string>(), item["matrix"].as<std::string>()});
    }
    return out;
  }();
  return cases;
}

std::string RenderAll() {
  std::string out;
  for (const auto& c : Cases()) {
    matrix::LoadedMatrix m;
    const std::string text = "name: golden\n" + c.matrix +
                             "\nworkload: {input_len: 16, output_len: 16, num_requests: 4, "
                             "concurrency: 1}\n";
    Status s = matrix::ExpandMatrix("golden.yaml", text, &m);
    EXPECT_TRUE(s.ok()) << c.title << ": " << s.message();
    if (!s.ok()) continue;
    const auto spec = m.matrix().getRuns()[0];
    const uint32_t nodes = std::max<uint32_t>(1, spec.getNodesNeeded());
    out += fmt::format("== {} ({} GPUs, {} node(s))\n", c.title, spec.getGpusNeeded(), nodes);
    std::vector<std::string> addresses;
    for (uint32_t r = 0; r < nodes; ++r) addresses.push_back(fmt::format("10.0.0.{}", r + 1));
    out += DescribeRunLaunches(spec, addresses, 8000, "/usr/bin/servesweep");
  }
  return out;
}

TEST(EngineArgv, MatchesTheGoldenTable) {
  const std::string actual = RenderAll();
  const std::string path = std::string(SERVESWEEP_SOURCE_DIR) + "/tests/golden/engine_argv.txt";
  if (std::getenv("SERVESWEEP_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << actual;
  }
  const std::string expected = testing::ReadSourceFile("tests/golden/engine_argv.txt");
  EXPECT_EQ(actual, expected) << "regenerate with SERVESWEEP_UPDATE_GOLDEN=1 and review the diff";
}

TEST(EngineArgv, RendezvousPortDependsOnSweepAndIndexOnly) {
  capnp::MallocMessageBuilder a_message, b_message;
  auto a = a_message.initRoot<schema::RunSpec>();
  auto b = b_message.initRoot<schema::RunSpec>();
  a.setSweepName("s");
  b.setSweepName("s");
  a.setIndex(3);
  b.setIndex(3);
  a.setRunId("s-0003-aaaaaaaa");
  b.setRunId("s-0003-bbbbbbbb");  // other conditions, other run id: same port
  b.setModel("another-model");
  EXPECT_EQ(DistPort(a.asReader()), DistPort(b.asReader()));
  const uint16_t port = DistPort(a.asReader());
  EXPECT_GE(port, 20000);
  EXPECT_LT(port, 39900);
  EXPECT_EQ(port % 100, 0);
  bool differs = false;  // other indices land elsewhere (199 slots; a few tries suffice)
  for (uint32_t i = 4; i < 8 && !differs; ++i) {
    b.setIndex(i);
    differs = DistPort(b.asReader()) != port;
  }
  EXPECT_TRUE(differs);
  a.getEngineConfig().setDistPort(25000);
  EXPECT_EQ(DistPort(a.asReader()), 25000);
}

// A cold engine per run and a kept one must be the same server: with llama.cpp's host-RAM
// prompt cache on only in per_run, requests arriving together shared one prefill batch there
// and not on the kept engine (TTFT -45%, TPOT +64% at 4 requests on 4 slots).
TEST(EngineArgv, LlamacppIsTheSameServerInBothLifecycles) {
  std::map<std::string, EngineLaunch> launches;
  for (const std::string lifecycle : {"per_run", "per_configuration"}) {
    const std::string yaml =
        "name: x\nengine: llamacpp\nmodel: m\nengine_lifecycle: " + lifecycle +
        "\nengine_config: {model_path: /m.gguf, max_num_seqs: 4}\n"
        "workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}\n";
    matrix::LoadedMatrix m;
    Status s = matrix::ExpandMatrix("x.yaml", yaml, &m);
    ASSERT_TRUE(s.ok()) << s.message();
    LaunchContext context;
    context.spec = m.matrix().getRuns()[0];
    s = MakeEngineAdapter("llamacpp")->Plan(context, &launches[lifecycle]);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  const EngineLaunch& cold = launches["per_run"];
  const EngineLaunch& kept = launches["per_configuration"];
  ASSERT_EQ(cold.processes.size(), 1u);
  ASSERT_EQ(kept.processes.size(), 1u);
  EXPECT_EQ(cold.processes[0].argv, kept.processes[0].argv);
  const std::string argv = fmt::format("{}", fmt::join(cold.processes[0].argv, " "));
  EXPECT_NE(argv.find("--cache-ram 0"), std::string::npos) << argv;
  // Only the kept engine is reset between runs.
  EXPECT_EQ(cold.cache_reset_path, "");
  EXPECT_EQ(kept.cache_reset_path, "/slots/{slot}?action=erase");
}

TEST(EngineArgv, ExternalEndpointReadsItsKeyFromAFile) {
  const std::string key_file = ::testing::TempDir() + "/servesweep-api-key";
  std::ofstream(key_file) << "  sk-from-file-456 \n";
  matrix::LoadedMatrix m;
  ASSERT_TRUE(matrix::ExpandMatrix("x.yaml",
                                   R"(name: x
engine: external
model: m
engine_config: {base_url: "https://api.example.com", api_key_file: ")" +
                                       key_file + R"("}
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
)",
                                   &m)
                  .ok());
  LaunchContext context;
  context.spec = m.matrix().getRuns()[0];
  EngineLaunch launch;
  Status planned = MakeEngineAdapter("external")->Plan(context, &launch);
  EXPECT_TRUE(planned.ok()) << planned.message();
  EXPECT_EQ(launch.api_key, "sk-from-file-456");
  EXPECT_EQ(DescribeLaunch(launch).find("sk-from-file"), std::string::npos);
  std::ofstream(key_file) << "\n";
  launch = {};
  planned = MakeEngineAdapter("external")->Plan(context, &launch);
  // The key is this node's: another node may have it, so the run is not refused everywhere.
  EXPECT_EQ(planned.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(planned.message(),
            key_file +
                " (engine_config.api_key_file): expected the key on its first line, "
                "found a blank line");
  std::remove(key_file.c_str());
  launch = {};
  planned = MakeEngineAdapter("external")->Plan(context, &launch);
  EXPECT_NE(planned.message().find("expected a readable file holding the key"), std::string::npos);
  EXPECT_EQ(launch.api_key, "");
}

TEST(EngineArgv, ExternalEndpointReadsItsKeyAndNeverPutsItInTheLaunch) {
  matrix::LoadedMatrix m;
  ASSERT_TRUE(matrix::ExpandMatrix("x.yaml", R"(name: x
engine: external
model: deepseek-ai/deepseek-v4.1-flash
engine_config:
  base_url: https://api.example.com/v1/
  api_key_env: SERVESWEEP_TEST_KEY
  price: {input_per_mtok: 0.1, output_per_mtok: 0.4, currency: USD}
workload: {input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}
)",
                                   &m)
                  .ok());
  LaunchContext context;
  context.spec = m.matrix().getRuns()[0];
  ::unsetenv("SERVESWEEP_TEST_KEY");
  EngineLaunch unkeyed;
  EXPECT_NE(MakeEngineAdapter("external")
                ->Plan(context, &unkeyed)
                .message()
                .find("environment variable SERVESWEEP_TEST_KEY (engine_config.api_key_env) is "
                      "not set"),
            std::string::npos);
  ::setenv("SERVESWEEP_TEST_KEY", "sk-secret-123", 1);
  EngineLaunch launch;
  const Status planned = MakeEngineAdapter("external")->Plan(context, &launch);
  EXPECT_TRUE(planned.ok()) << planned.message();
  EXPECT_EQ(launch.base_url, "https://api.example.com");
  EXPECT_EQ(launch.api_key, "sk-secret-123");
  EXPECT_TRUE(launch.processes.empty());
  EXPECT_EQ(DescribeLaunch(launch).find("sk-secret"), std::string::npos);
  EXPECT_EQ(context.spec.getEngineConfig().getPriceOutputPerMTok(), 0.4);
  ::unsetenv("SERVESWEEP_TEST_KEY");
}

TEST(FlagTables, EveryEmbeddedTableParsesAndNamesItsSource) {
  ASSERT_GE(EmbeddedFlagTablePaths().size(), 4u);
  for (auto path : EmbeddedFlagTablePaths()) {
    FlagTable table;
    Status s = ParseFlagTable(EmbeddedFlagTable(path), std::string(path), &table);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_FALSE(table.source.empty()) << path;
    EXPECT_TRUE(table.Has("port")) << path;
    EXPECT_TRUE(table.Has("served_model_name")) << path;
  }
}

// The Containerfile example builds on the published engine images at versions a flag table was
// checked against: a table moved to a new release moves the example with it.
TEST(FlagTables, TheContainerExampleUsesEngineImagesAtCheckedVersions) {
  std::map<std::string, std::set<std::string>> checked;  // engine -> checked versions
  for (auto path : EmbeddedFlagTablePaths()) {
    FlagTable table;
    ASSERT_TRUE(ParseFlagTable(EmbeddedFlagTable(path), std::string(path), &table).ok());
    checked[table.engine].insert(table.checked_first);
    checked[table.engine].insert(table.checked_last);
  }
  const std::string file = testing::ReadSourceFile("examples/containers/Containerfile");
  const std::map<std::string, std::string> images = {{"vllm", R"(vllm/vllm-openai:v([0-9.]+))"},
                                                     {"sglang", R"(lmsysorg/sglang:v([0-9.]+))"}};
  for (const auto& [engine, pattern] : images) {
    const std::regex re(pattern);
    size_t found = 0;
    for (auto it = std::sregex_iterator(file.begin(), file.end(), re); it != std::sregex_iterator();
         ++it, ++found) {
      EXPECT_EQ(checked[engine].count((*it)[1].str()), 1u)
          << (*it)[0].str() << ": no " << engine << " flag table was checked at this version";
    }
    EXPECT_GT(found, 0u) << "examples/containers/Containerfile names no " << engine << " image";
  }
}

// A misspelt key in a table is refused where it stands, with the key it was meant to be; a table
// key is one of the settings adapters ask for (FlagKeys), nothing else.
TEST(FlagTables, AMisspeltKeyNamesFileLineColumnAndTheClosestKey) {
  const std::string table = R"(engine: vllm
version: "0.33.0"
source: test
program: [vllm, serve]
flags:
  port: [--port, "{port}"]
  tensor_paralel: [--tensor-parallel-size, "{tp}"]
)";
  FlagTable parsed;
  Status s = ParseFlagTable(table, "flags/test.yaml", &parsed);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("flags/test.yaml:7:3: unknown key 'tensor_paralel' in flags"),
            std::string::npos)
      << s.message();
  s = ParseFlagTable(std::string(table).replace(table.find("tensor_paralel"), 14, "tp"), "t.yaml",
                     &parsed);
  ASSERT_TRUE(s.ok()) << s.message();
  s = ParseFlagTable("engine: vllm\nversion: '1'\nsource: x\nprogram: [v]\nflags: {}\nroutr: {}\n",
                     "t.yaml", &parsed);
  EXPECT_NE(s.message().find("t.yaml:6:1: unknown key 'routr' in the flag table (did you mean "
                             "'router'?)"),
            std::string::npos)
      << s.message();
  // A wrong type is positioned too (the old reader threw outside any try).
  s = ParseFlagTable(
      "engine: vllm\nversion: '1'\nsource: x\nprogram: [v]\nflags: {}\nreuse_connections: maybe\n",
      "t.yaml", &parsed);
  EXPECT_NE(s.message().find("t.yaml:6:20: expected 'reuse_connections' to be true or false, "
                             "found 'maybe'"),
            std::string::npos)
      << s.message();
}

// A table applies to the versions whose own parsers accepted it (checked_versions); a version
// outside them gets the nearest older table marked unchecked, never silently.
TEST(FlagTables, AVersionOutsideEveryCheckedRangeIsMarkedUnchecked) {
  FlagTable table;
  ASSERT_TRUE(FindFlagTable("vllm", "0.33.0", &table).ok());
  EXPECT_EQ(table.version, "0.33.0");
  EXPECT_EQ(table.unchecked, "");
  ASSERT_TRUE(FindFlagTable("vllm", "0.11.0", &table).ok());
  EXPECT_EQ(table.version, "0.11.0");
  EXPECT_EQ(table.unchecked, "");
  ASSERT_TRUE(FindFlagTable("vllm", "", &table).ok());
  EXPECT_EQ(table.version, "0.33.0");
  EXPECT_EQ(table.unchecked, "");
  for (const char* outside : {"0.11.2", "0.12.1", "0.32.0"}) {
    ASSERT_TRUE(FindFlagTable("vllm", outside, &table).ok()) << outside;
    EXPECT_EQ(table.version, "0.11.0") << outside;
    EXPECT_NE(table.unchecked.find(fmt::format("vllm {} is outside every flag table's checked "
                                               "versions (0.11.0; 0.33.0)",
                                               outside)),
              std::string::npos)
        << table.unchecked;
  }
  ASSERT_TRUE(FindFlagTable("vllm", "0.34.1", &table).ok());
  EXPECT_EQ(table.version, "0.33.0");
  EXPECT_NE(table.unchecked, "");
  Status old = FindFlagTable("vllm", "0.8.5", &table);
  EXPECT_EQ(old.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(old.message().find("older than every flag table"), std::string::npos) << old.message();
  EXPECT_EQ(CompareVersions("0.9.2", "0.11.0"), -1);
  EXPECT_EQ(CompareVersions("0.11", "0.11.0"), 0);
  // The range is data, read with the table.
  Status bad = ParseFlagTable(
      "engine: vllm\nversion: '1'\nchecked_versions: ['2', '1']\nsource: x\nprogram: [v]\n"
      "flags: {}\n",
      "t.yaml", &table);
  EXPECT_NE(bad.message().find("t.yaml:3:19: expected 'checked_versions' to be [first, last]"),
            std::string::npos)
      << bad.message();
}

RankLaunch PlanOf(const std::string& run_keys, uint32_t rank = 0) {
  matrix::LoadedMatrix m;
  const std::string text = "name: t\n" + run_keys +
                           "\nworkload: {input_len: 16, output_len: 16, num_requests: 4, "
                           "concurrency: 1}\n";
  Status s = matrix::ExpandMatrix("t.yaml", text, &m);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return {};
  const auto spec = m.matrix().getRuns()[0];
  const uint32_t nodes = std::max<uint32_t>(1, spec.getNodesNeeded());
  std::vector<std::string> addresses;
  for (uint32_t r = 0; r < nodes; ++r) addresses.push_back(fmt::format("10.0.0.{}", r + 1));
  return PlanRunLaunches(spec, addresses, 8000, "servesweep")[rank];
}

std::string ArgvOf(const RankLaunch& planned, const std::string& name) {
  for (const auto& p : planned.launch.processes) {
    if (p.name == name) return fmt::format("{}", fmt::join(p.argv, " "));
  }
  return "";
}

// vLLM 0.11.0's NIXL side channel listens on VLLM_NIXL_SIDE_CHANNEL_PORT + tp_rank on every TP
// rank: instances on one node must be spaced by their TP size, and every port of a run is its
// own (HTTP, bootstrap, router metrics, side channels).
TEST(EngineArgv, Vllm0110NixlSideChannelsOfEveryTpRankAreDistinct) {
  for (const char* layout : {"{tp: 2, prefill_instances: 1, decode_instances: 1}",
                             "{tp: 4, prefill_instances: 2, decode_instances: 2, "
                             "gpus_per_node: 16}"}) {
    const RankLaunch launch = PlanOf(fmt::format(
        "engine: vllm\nengine_version: '0.11.0'\nmodel: m\nengine_config: {{dist_port: 30000}}\n"
        "layout: {}",
        layout));
    ASSERT_TRUE(launch.planned.ok()) << launch.planned.message();
    std::set<uint32_t> ports = {30039};  // the router's Prometheus listener
    for (const auto& p : launch.launch.processes) {
      if (p.name == "router") continue;
      const std::string argv = ArgvOf(launch, p.name);
      const uint32_t tp = std::stoul(argv.substr(argv.find("--tensor-parallel-size ") + 23));
      for (const auto& [name, value] : p.env) {
        if (name != "VLLM_NIXL_SIDE_CHANNEL_PORT") continue;
        for (uint32_t rank = 0; rank < tp; ++rank) {
          EXPECT_TRUE(ports.insert(std::stoul(value) + rank).second)
              << p.name << " rank " << rank << " reuses port " << std::stoul(value) + rank;
        }
      }
      const size_t at = argv.find("--port ");
      ASSERT_NE(at, std::string::npos) << argv;
      EXPECT_TRUE(ports.insert(std::stoul(argv.substr(at + 7))).second) << argv;
    }
    EXPECT_GE(ports.size(), 6u) << layout;
  }
  // 0.33 opens one side-channel port per engine: consecutive ports suffice there.
  const EngineLaunch v033 =
      PlanOf(
          "engine: vllm\nengine_version: '0.33.0'\nmodel: m\nengine_config: {dist_port: 30000}\n"
          "layout: {tp: 2, prefill_instances: 1, decode_instances: 1}")
          .launch;
  EXPECT_EQ(v033.processes[1].env[2].second, "30071");
  // Side channels that cannot fit the run's ports are refused, not overlapped.
  const Status crowded =
      PlanOf(
          "engine: vllm\nengine_version: '0.11.0'\nmodel: m\nengine_config: {dist_port: 30000}\n"
          "layout: {tp: 8, prefill_instances: 2, decode_instances: 2, gpus_per_node: 32}")
          .planned;
  EXPECT_EQ(crowded.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(crowded.message().find("do not fit the run's ports 30000..30099"), std::string::npos)
      << crowded.message();
}

// One matrix spelling of speculative decoding, turned into what each engine version wants.
TEST(EngineArgv, SpeculativeDecodingIsSpelledPerEngineOrRefusedBeforeLaunch) {
  const std::string deepseek = "model: deepseek-v3\nlayout: {tp: 8}\n";
  // vLLM's MTP is SGLang's NEXTN; SGLang's EAGLE family takes steps, top-k and draft tokens
  // together (a chain of N verifies N + 1 tokens).
  EXPECT_NE(ArgvOf(PlanOf("engine: vllm\n" + deepseek +
                          "engine_config: {speculative: {method: mtp, num_tokens: 2}}"),
                   "engine")
                .find(R"(--speculative-config {"method":"mtp","num_speculative_tokens":2})"),
            std::string::npos);
  EXPECT_NE(ArgvOf(PlanOf("engine: sglang\n" + deepseek +
                          "engine_config: {speculative: {method: MTP, num_tokens: 2}}"),
                   "engine")
                .find("--speculative-algorithm NEXTN --speculative-num-steps 2 "
                      "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3"),
            std::string::npos);
  EXPECT_NE(ArgvOf(PlanOf("engine: sglang\nmodel: m\nengine_config: {speculative: {method: "
                          "eagle3, model: /d, num_tokens: 3, eagle_topk: 4, num_draft_tokens: 8}}"),
                   "engine")
                .find("--speculative-algorithm EAGLE3 --speculative-draft-model-path /d "
                      "--speculative-num-steps 3 --speculative-eagle-topk 4 "
                      "--speculative-num-draft-tokens 8"),
            std::string::npos);
  // SGLang picks all three itself when none is given.
  const std::string automatic =
      ArgvOf(PlanOf("engine: sglang\n" + deepseek + "engine_config: {speculative: {method: mtp}}"),
             "engine");
  EXPECT_NE(automatic.find("--speculative-algorithm NEXTN"), std::string::npos) << automatic;
  EXPECT_EQ(automatic.find("--speculative-num"), std::string::npos) << automatic;
  struct Refused {
    std::string keys, message;
  };
  for (const Refused& r : std::vector<Refused>{
           {"engine: vllm\nmodel: m\nengine_config: {speculative: {method: eagle3, model: /d}}",
            "vllm 0.33.0 needs the draft tokens per step for 'eagle3'"},
           {"engine: vllm\nmodel: m\nengine_config: {speculative: {method: eagle3, model: /d, "
            "num_tokens: 3, eagle_topk: 2, num_draft_tokens: 6}}",
            "eagle_topk and num_draft_tokens shape a draft tree, which vllm 0.33.0 does not "
            "take"},
           {"engine: sglang\nmodel: m\nengine_config: {speculative: {method: eagle3, model: /d, "
            "num_tokens: 3, eagle_topk: 4}}",
            "eagle_topk 4 makes a tree; sglang 0.5.23 needs its size too"},
           {"engine: sglang\nmodel: m\nengine_config: {speculative: {method: eagle3, model: /d, "
            "eagle_topk: 4, num_draft_tokens: 8}}",
            "sglang 0.5.23 takes steps, eagle_topk and num_draft_tokens together"},
           {"engine: sglang\nmodel: m\nengine_config: {speculative: {method: medusa, "
            "num_tokens: 2}}",
            "'medusa' has no counterpart in sglang 0.5.23: expected one of draft, eagle, eagle3, "
            "mtp, ngram"},
           {"engine: vllm\nmodel: m\nengine_config: {speculative: {num_tokens: 2}}",
            "expected a method (or a draft model) with its token counts"},
       }) {
    const RankLaunch launch = PlanOf(r.keys);
    EXPECT_NE(launch.planned.message().find(r.message), std::string::npos)
        << r.keys << "\n"
        << launch.planned.message();
    EXPECT_EQ(launch.planned.code(), StatusCode::kInvalidArgument) << r.keys;
    EXPECT_TRUE(launch.launch.processes.empty()) << r.keys;
  }
}

TEST(FlagTables, PlaceholdersFillAndUnknownOnesFail) {
  std::string out;
  ASSERT_TRUE(FillPlaceholders(R"({"kv_role":"{role}"})", {{"role", "kv_producer"}}, &out).ok());
  EXPECT_EQ(out, R"({"kv_role":"kv_producer"})");
  Status s = FillPlaceholders("--port {prot}", {{"port", "1"}}, &out);
  EXPECT_NE(s.message().find("placeholder {prot}"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace servesweep::engines
