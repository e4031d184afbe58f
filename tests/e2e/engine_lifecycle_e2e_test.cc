// End-to-end: engine_lifecycle over the real processes (`servesweep run`: a coordinator, a local
// agent, the emulator as its engine). One engine per configuration serves every load level of
// it, in the order placed, each run after the first starting from a reset prefix cache; per_run
// starts a cold engine per run; a reset that does not reset is caught by the agent's check.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Two configurations (itl 2 and 3 ms) x three levels, the level axis first so the run order
// alternates between configurations: the coordinator must still keep each on its engine.
std::string Matrix(const std::string& lifecycle, int agents = 1) {
  return fmt::format(R"(name: lifecycle
engine: sim
model: test-model
engine_lifecycle: {}
local: {{agents: {}, gpus_per_agent: 1}}
workload: {{input_len: 16, output_len: 8, num_requests: 12, warmup_requests: 2}}
axes:
  concurrency: [1, 2, 4]
  sim: [{{ttft_ms: 5, itl_ms: 2, startup_ms: 300}}, {{ttft_ms: 5, itl_ms: 3, startup_ms: 300}}]
)",
                     lifecycle, agents);
}

struct EngineRow {
  std::string engine_id, cache_state, cold_start_ms, validity;
  int64_t run_index = 0;
  double age_s = 0;
};

// `servesweep run` of the matrix, then each result's engine columns (none when the run failed).
std::vector<EngineRow> RunAndReadEngines(Harness& h, const std::string& matrix_text) {
  const std::string matrix = h.WriteFile("m.yaml", matrix_text);
  const std::string out = h.Path("out");
  std::string output;
  const int exit_code =
      RunServesweep(fmt::format("run {} --out {} --progress off", matrix, out), &output);
  EXPECT_EQ(exit_code, 0) << output;
  if (exit_code != 0) return {};
  const auto table = h.Query(out,
                             "SELECT engine_id, engine_run_index, engine_age_s, cache_state, "
                             "IFNULL(cold_start_ms, 'null'), validity, engine_lifecycle "
                             "FROM results ORDER BY engine_id, engine_run_index");
  std::vector<EngineRow> rows;
  for (const auto& r : table.rows) {
    rows.push_back({r[0], r[3], r[4], r[5], std::stoll(r[1]), std::stod(r[2])});
  }
  return rows;
}

TEST(EngineLifecycle, OneEngineServesEveryLevelOfItsConfigurationFromAResetCache) {
  Harness h("lifecycle_kept");
  const auto rows = RunAndReadEngines(h, Matrix("per_configuration"));
  ASSERT_EQ(rows.size(), 6u);
  std::map<std::string, std::vector<EngineRow>> by_engine;
  for (const auto& r : rows) by_engine[r.engine_id].push_back(r);
  ASSERT_EQ(by_engine.size(), 2u) << "one engine per configuration";
  for (const auto& [id, runs] : by_engine) {
    ASSERT_EQ(runs.size(), 3u) << id;
    for (int64_t i = 0; i < 3; ++i) {
      const EngineRow& r = runs[i];
      EXPECT_EQ(r.run_index, i) << id;
      EXPECT_EQ(r.validity, "valid") << id << " " << i;
      if (i == 0) {
        EXPECT_EQ(r.cache_state, "cold");
        EXPECT_NE(r.cold_start_ms, "null");  // the engine's cold start, on its first run only
        EXPECT_GE(std::stod(r.cold_start_ms), 300);
      } else {
        EXPECT_EQ(r.cache_state, "reset") << id << " " << i;
        EXPECT_EQ(r.cold_start_ms, "null") << id << " " << i;
        EXPECT_GT(r.age_s, runs[i - 1].age_s) << id;
      }
    }
  }
  // Each run held its GPUs longer than its measured phase; the report sums the time by phase,
  // with one engine start per configuration.
  EXPECT_EQ(h.QueryInt(h.Path("out"), "SELECT COUNT(*) FROM results WHERE attempt_s > duration_s"),
            6);
  const std::string report = ReadTextFile(h.Path("out") + "/report.md");
  EXPECT_NE(report.find("## GPU time"), std::string::npos) << report;
  EXPECT_NE(report.find("(2 engine start(s))"), std::string::npos) << report;
  EXPECT_NE(report.find("| warm #2, reset |"), std::string::npos) << report;
  EXPECT_EQ(h.QueryInt(h.Path("out"),
                       "SELECT COUNT(*) FROM results WHERE engine_lifecycle = "
                       "'per_configuration'"),
            6);
}

// Two agents, a slow configuration placed first and a fast one: the fast one's agent finishes
// first every time, and must be given its own configuration's next run (plain run order would
// hand it the slow configuration's, and start a new engine for each).
TEST(EngineLifecycle, AnAgentThatKeepsAnEngineGetsItsConfigurationsNextRun) {
  Harness h("lifecycle_two_agents");
  const auto rows = RunAndReadEngines(h, R"(name: lifecycle
engine: sim
model: test-model
local: {agents: 2, gpus_per_agent: 1}
workload: {input_len: 16, output_len: 8, num_requests: 12, warmup_requests: 2}
axes:
  concurrency: [1, 2, 4]
  sim: [{ttft_ms: 5, itl_ms: 12, startup_ms: 300}, {ttft_ms: 1, itl_ms: 1, startup_ms: 300}]
)");
  ASSERT_EQ(rows.size(), 6u);
  const auto table = h.Query(h.Path("out"),
                             "SELECT engine_id, engine_run_index FROM results JOIN runs "
                             "USING(run_id) WHERE runs.label LIKE '%itl_ms=1 %' ORDER BY "
                             "engine_run_index");
  ASSERT_EQ(table.rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(table.rows[i][0], table.rows[0][0]) << "the fast configuration's runs on one engine";
    EXPECT_EQ(table.rows[i][1], std::to_string(i));
  }
}

// A layout over two agents (tp 2, one GPU each): its three levels run on one engine, kept on
// both agents between runs (the worker told so on release) and placed again on the same agents
// in the same order, each run after the first from a reset cache.
TEST(EngineLifecycle, ALayoutOverTwoAgentsKeepsItsEngineOnTheSameAgents) {
  Harness h("lifecycle_group");
  const auto rows = RunAndReadEngines(h, R"(name: lifecycle
engine: sim
model: test-model
local: {agents: 2, gpus_per_agent: 1}
layout: {tp: 2, gpus_per_node: 1}
sim: {ttft_ms: 5, itl_ms: 2, startup_ms: 300}
workload: {input_len: 16, output_len: 8, num_requests: 12, warmup_requests: 2}
axes:
  concurrency: [1, 2, 4]
)");
  ASSERT_EQ(rows.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i].engine_id, rows[0].engine_id) << "one engine for the configuration";
    EXPECT_EQ(rows[i].run_index, i);
    EXPECT_EQ(rows[i].cache_state, i == 0 ? "cold" : "reset") << i;
    EXPECT_EQ(rows[i].validity, "valid") << i;
  }
  const auto agents = h.Query(h.Path("out"), "SELECT DISTINCT agents FROM results");
  ASSERT_EQ(agents.rows.size(), 1u) << "the same agents, in the same order, every time";
  EXPECT_EQ(agents.rows[0][0], "local-0 local-1");
  EXPECT_NE(ReadTextFile(h.Path("out") + "/report.md").find("(1 engine start(s))"),
            std::string::npos);
}

// Two agents, one configuration of two levels: the first level's agent keeps its engine for the
// second (pending when it was assigned), but the other agent takes that level at once. The
// first, shorter level ends while the second runs: the engine it keeps is for no run left, and
// the coordinator releases it then rather than at the sweep's end.
TEST(EngineLifecycle, AKeptEngineThatNoRunNeedsIsReleased) {
  Harness h("lifecycle_release");
  const auto rows = RunAndReadEngines(h, R"(name: release
engine: sim
model: test-model
local: {agents: 2, gpus_per_agent: 1}
sim: {ttft_ms: 5, itl_ms: 5, startup_ms: 300}
workload: {input_len: 16, output_len: 8, warmup_requests: 0}
zip:
  - concurrency: [8, 1]
    num_requests: [16, 48]
)");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NE(rows[0].engine_id, rows[1].engine_id);
  int released = 0;
  for (const char* agent : {"local-0", "local-1"}) {
    const std::string log = ReadTextFile(h.Path(fmt::format("out/agents/{}/agent.log", agent)));
    if (log.find("no run of its configuration is left") != std::string::npos) ++released;
  }
  EXPECT_EQ(released, 1) << "the first level's agent stops its engine when it ends";
}

TEST(EngineLifecycle, PerRunStartsAColdEngineForEveryRun) {
  Harness h("lifecycle_per_run");
  const auto rows = RunAndReadEngines(h, Matrix("per_run"));
  ASSERT_EQ(rows.size(), 6u);
  std::set<std::string> engines;
  for (const auto& r : rows) {
    engines.insert(r.engine_id);
    EXPECT_EQ(r.run_index, 0);
    EXPECT_EQ(r.cache_state, "cold");
    EXPECT_NE(r.cold_start_ms, "null");
  }
  EXPECT_EQ(engines.size(), 6u);
}

// The emulator with the performance model caches prompt prefixes; with its reset broken the
// agent's check (a prompt repeated after the reset) finds the cached tokens and says so.
TEST(EngineLifecycle, AResetThatKeepsTheCacheIsRecordedNotReset) {
  for (const bool broken : {false, true}) {
    Harness h(broken ? "lifecycle_broken_reset" : "lifecycle_model_reset");
    const auto rows = RunAndReadEngines(h, fmt::format(R"(name: reset
engine: sim
model: meta-llama/Llama-3.1-8B-Instruct
sim: {{hardware: h100, startup_ms: 1}}
{}local: {{agents: 1, gpus_per_agent: 1}}
workload: {{input_len: 64, output_len: 4, num_requests: 6, warmup_requests: 1}}
axes:
  concurrency: [1, 2]
)",
                                                       broken ? "engine_flags: "
                                                                "[--fault-ignore-cache-"
                                                                "reset]\n"
                                                              : ""));

    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].engine_id, rows[1].engine_id);
    EXPECT_EQ(rows[0].cache_state, "cold");
    if (broken) {
      EXPECT_EQ(
          rows[1].cache_state.rfind("not_reset: a prompt repeated after the reset still hit ", 0),
          0u)
          << "state: " << rows[1].cache_state;
    } else {
      EXPECT_EQ(rows[1].cache_state, "reset");
    }
  }
}

}  // namespace
}  // namespace servesweep::testing
