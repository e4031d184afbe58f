// Golden tests of the exact processes (argv and environment) the engine adapters start, for a
// table of layouts on one node, several nodes and disaggregated, per role and rank. The expected
// text is tests/golden/engine_argv.txt; SERVESWEEP_UPDATE_GOLDEN=1 rewrites it (then review the
// diff against the engines' own argument parsers named in agent/engines/flags/).
#include <capnp/message.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "agent/engine_processes.h"
#include "agent/engines/engine_adapter.h"
#include "agent/engines/flag_table.h"
#include "agent/engines/launch_plan.h"
#include "agent/engines/launch_values.h"
#include "agent/run_executor.h"
#include "coordinator/placement.h"
#include "matrix/matrix_loader.h"
#include "testing/process_helpers.h"

namespace servesweep::agent {
namespace {

struct Case {
  std::string title;
  std::string matrix;  // run keys; the workload is added
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"vllm 0.33 one node: tp 2, fp8, kv fp8, batching, prefix caching off, EAGLE3",
       R"(engine: vllm
engine_version: "0.33.0"
model: llama-70b
engine_config:
  model_path: /models/Llama-3.3-70B-Instruct
  max_num_seqs: 256
  max_batched_tokens: 8192
  context_len: 8192
  prefix_caching: false
  chunked_prefill: true
  gpu_memory_fraction: 0.9
  speculative: {method: eagle3, model: /models/eagle3-llama-70b, num_tokens: 3}
quantization: fp8
kv_cache_dtype: fp8_e4m3
engine_flags: ["--seed", "1"]
layout: {tp: 2})"},
      {"vllm 0.33 data parallel across 2 nodes: tp 4, dp 4, expert parallel",
       R"(engine: vllm
engine_version: "0.33.0"
model: deepseek-v3
layout: {tp: 4, dp: 4, ep: true, gpus_per_node: 8})"},
      {"vllm 0.33 one TP group across 2 nodes: tp 16",
       R"(engine: vllm
engine_version: "0.33.0"
model: deepseek-v3
layout: {tp: 16, gpus_per_node: 8})"},
      {"vllm 0.11 one TP group across 2 nodes (needs Ray: refused)",
       R"(engine: vllm
engine_version: "0.11.2"
model: deepseek-v3
layout: {tp: 16, gpus_per_node: 8})"},
      {"vllm 0.33 disaggregated 1P1D tp 2 on one node",
       R"(engine: vllm
model: llama-8b
engine_config: {dist_port: 30000}
layout: {tp: 2, prefill_instances: 1, decode_instances: 1})"},
      {"vllm 0.33 disaggregated 2P2D tp 4 over 2 nodes of 8",
       R"(engine: vllm
model: llama-70b
engine_config: {dist_port: 30000, kv_transfer: NixlConnector}
layout: {tp: 4, prefill_instances: 2, decode_instances: 2, gpus_per_node: 8})"},
      {"sglang 0.5.23 one node: tp 8, dp attention 8, expert parallel",
       R"(engine: sglang
engine_version: "0.5.23"
model: deepseek-v3
engine_config: {model_path: deepseek-ai/DeepSeek-V3, max_num_seqs: 512, context_len: 32768}
quantization: fp8
layout: {tp: 8, dp: 8, dp_attention: true, ep: true})"},
      {"sglang 0.5.23 dp replicas: tp 2, dp 2, radix cache off, chunked prefill 4096, ngram",
       R"(engine: sglang
model: qwen-7b
engine_config:
  prefix_caching: false
  chunked_prefill_tokens: 4096
  speculative: {method: ngram, num_tokens: 8}
layout: {tp: 2, dp: 2})"},
      {"sglang 0.5.23 across 2 nodes: tp 16",
       R"(engine: sglang
model: deepseek-v3
engine_config: {dist_port: 25000}
layout: {tp: 16, gpus_per_node: 8})"},
      {"sglang 0.5.23 disaggregated 1P1D tp 1 on one node, nixl",
       R"(engine: sglang
model: llama-8b
engine_config: {dist_port: 30000, kv_transfer: nixl}
layout: {tp: 1, prefill_instances: 1, decode_instances: 1})"},
      {"sglang 0.5.23 disaggregated 1P2D tp 8 dp attention over 3 nodes of 8",
       R"(engine: sglang
model: deepseek-v3
engine_config: {dist_port: 30000, kv_transfer: mooncake}
layout: {tp: 8, dp: 8, dp_attention: true, ep: true, prefill_instances: 1, decode_instances: 2, gpus_per_node: 8})"},
      {"llamacpp: 4 slots, 4096 context, 2 threads",
       R"(engine: llamacpp
model: smollm2
engine_config: {model_path: /opt/models/SmolLM2-135M-Instruct.Q4_1.gguf, max_num_seqs: 4, context_len: 4096, threads: 2})"},
      {"llamacpp with tp 2 (refused)",
       R"(engine: llamacpp
model: smollm2
layout: {tp: 2})"},
      {"template: an engine servesweep does not know",
       R"(engine: template
model: m
engine_config: {command: [my-engine, serve, "{model_path}", --port, "{port}", --tp, "{tp}"], health_path: /ready}
layout: {tp: 2})"},
  };
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

// Disaggregated layouts over two agents, through the whole assignment path: the coordinator's
// FillAssign (placement order, each agent's announced address) -> the Assign message -> the
// agent's LaunchContextFor -> the adapter. The router on the head must reach the instances on
// the other agent at that agent's own address.
// `old_coordinator`: the assignment carries the head's address only, as before peerAddresses.
std::string RenderTwoAgentPd(const std::vector<std::string>& addresses, bool old_coordinator) {
  std::string out;
  const std::vector<std::string> agent_ids = {"node-a", "node-b"};
  for (const char* engine : {"vllm", "sglang"}) {
    matrix::LoadedMatrix m;
    const std::string text = fmt::format(R"(name: golden
engine: {}
model: llama-70b
engine_config: {{dist_port: 30000}}
layout: {{tp: 4, prefill_instances: 2, decode_instances: 2, gpus_per_node: 8}}
workload: {{input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}}
)",
                                         engine);
    Status s = matrix::ExpandMatrix("golden.yaml", text, &m);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return out;
    const auto spec = m.matrix().getRuns()[0];
    EXPECT_EQ(spec.getNodesNeeded(), 2u);
    out += fmt::format("== {} 2P2D tp 4 on agents {} at {}\n", engine, fmt::join(agent_ids, ", "),
                       fmt::join(addresses, ", "));
    for (uint32_t rank = 0; rank < agent_ids.size(); ++rank) {
      capnp::MallocMessageBuilder message;
      auto assign = message.initRoot<schema::Assign>();
      coordinator::FillAssign(spec, 1, rank, agent_ids, addresses, assign);
      if (old_coordinator) assign.initPeerAddresses(0);
      LaunchContext context = LaunchContextFor(assign.asReader());
      context.port = 8000;
      out += fmt::format(" {} rank {}:\n", rank == 0 ? "head" : "worker", rank);
      out += DescribeLaunch(MakeEngineAdapter(engine)->Plan(context));
    }
  }
  return out;
}

TEST(EngineArgv, TwoAgentDisaggregationGetsEveryAgentsAddressFromTheAssignment) {
  const std::string actual = RenderTwoAgentPd({"192.168.7.21", "192.168.7.22"}, false);
  const std::string path =
      std::string(SERVESWEEP_SOURCE_DIR) + "/tests/golden/engine_argv_two_agent_pd.txt";
  if (std::getenv("SERVESWEEP_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << actual;
  EXPECT_EQ(actual, testing::ReadSourceFile("tests/golden/engine_argv_two_agent_pd.txt"))
      << "regenerate with SERVESWEEP_UPDATE_GOLDEN=1 and review the diff";
  // The decode instances are on the second agent, and the router says so.
  EXPECT_NE(actual.find("--decode http://192.168.7.22:30003"), std::string::npos) << actual;
  EXPECT_NE(actual.find("--prefill http://192.168.7.21:30001"), std::string::npos) << actual;
}

TEST(EngineArgv, AnAssignmentWithoutAddressesFailsTheDisaggregatedRunWithItsReason) {
  const std::string actual = RenderTwoAgentPd({"192.168.7.21", "192.168.7.22"}, true);
  EXPECT_NE(actual.find("the router needs the address of agent rank 1"), std::string::npos)
      << actual;
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
  EngineLaunch launch = MakeEngineAdapter("external")->Plan(context);
  EXPECT_TRUE(launch.error.empty()) << launch.error;
  EXPECT_EQ(launch.api_key, "sk-from-file-456");
  EXPECT_EQ(DescribeLaunch(launch).find("sk-from-file"), std::string::npos);
  std::ofstream(key_file) << "\n";
  launch = MakeEngineAdapter("external")->Plan(context);
  EXPECT_EQ(launch.error, key_file +
                              " (engine_config.api_key_file): expected the key on its first line, "
                              "found a blank line");
  std::remove(key_file.c_str());
  launch = MakeEngineAdapter("external")->Plan(context);
  EXPECT_NE(launch.error.find("expected a readable file holding the key"), std::string::npos);
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
  EXPECT_NE(
      MakeEngineAdapter("external")
          ->Plan(context)
          .error.find(
              "environment variable SERVESWEEP_TEST_KEY (engine_config.api_key_env) is not set"),
      std::string::npos);
  ::setenv("SERVESWEEP_TEST_KEY", "sk-secret-123", 1);
  const EngineLaunch launch = MakeEngineAdapter("external")->Plan(context);
  EXPECT_TRUE(launch.error.empty()) << launch.error;
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

TEST(FlagTables, PicksTheNewestTableNotAfterTheVersion) {
  FlagTable table;
  ASSERT_TRUE(FindFlagTable("vllm", "0.12.1", &table).ok());
  EXPECT_EQ(table.version, "0.11.0");
  ASSERT_TRUE(FindFlagTable("vllm", "0.33.0", &table).ok());
  EXPECT_EQ(table.version, "0.33.0");
  ASSERT_TRUE(FindFlagTable("vllm", "", &table).ok());
  EXPECT_EQ(table.version, "0.33.0");
  Status old = FindFlagTable("vllm", "0.8.5", &table);
  EXPECT_NE(old.message().find("older than every flag table"), std::string::npos) << old.message();
  EXPECT_EQ(CompareVersions("0.9.2", "0.11.0"), -1);
  EXPECT_EQ(CompareVersions("0.11", "0.11.0"), 0);
}

TEST(FlagTables, PlaceholdersFillAndUnknownOnesFail) {
  std::string out;
  ASSERT_TRUE(FillPlaceholders(R"({"kv_role":"{role}"})", {{"role", "kv_producer"}}, &out).ok());
  EXPECT_EQ(out, R"({"kv_role":"kv_producer"})");
  Status s = FillPlaceholders("--port {prot}", {{"port", "1"}}, &out);
  EXPECT_NE(s.message().find("placeholder {prot}"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace servesweep::agent
