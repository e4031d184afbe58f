// End-to-end: GPU telemetry, GPU provenance and the readiness probe in a real sweep
// (`servesweep run`, a real agent, a real engine process). The GPUs are a fake nvidia-smi on
// PATH (tests/data/fake-nvidia-smi, a real child process printing CSV rows every interval), so
// this runs on machines without GPUs; without it the record says there was no nvidia-smi.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "common/ids.h"
#include "common/net.h"
#include "tests/support/fake_nvidia_smi.h"
#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Files under `dir` whose name ends with `suffix`.
int FilesEndingWith(const std::string& dir, const std::string& suffix) {
  int count = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix) ++count;
  }
  return count;
}

// A coordinator of `matrix` bound at `endpoint` (results in `out`), then one agent per id with
// one emulated GPU, its spool and work folder under dir/<id>/, `agent_flags(id)` added; the
// coordinator's index. `before_agent(id)` runs just before each agent starts (its environment).
size_t StartCoordinatorAndAgents(
    Harness& h, const std::string& matrix, const std::string& endpoint, const std::string& out,
    const std::vector<std::string>& coordinator_flags, const std::vector<std::string>& ids,
    const std::function<std::vector<std::string>(const std::string&)>& agent_flags,
    const std::function<void(const std::string&)>& before_agent = {}) {
  std::vector<std::string> coordinator_args = {"coordinator", matrix,  "--bind",
                                               endpoint,      "--out", out};
  coordinator_args.insert(coordinator_args.end(), coordinator_flags.begin(),
                          coordinator_flags.end());
  for (const auto& arg : h.CoordinatorKeyArgs()) coordinator_args.push_back(arg);
  const size_t coordinator = h.Start("coordinator", coordinator_args);
  for (const std::string& id : ids) {
    std::vector<std::string> args = {"agent",
                                     "--connect",
                                     endpoint,
                                     "--id",
                                     id,
                                     "--emulate-gpus",
                                     "1",
                                     "--spool",
                                     h.Path(id + "/spool"),
                                     "--work-dir",
                                     h.Path(id + "/work")};
    for (const auto& arg : agent_flags(id)) args.push_back(arg);
    for (const auto& arg : h.AgentKeyArgs()) args.push_back(arg);
    if (before_agent) before_agent(id);
    h.Start(id, args);
  }
  return coordinator;
}

void RunSweep(Harness& h, const std::string& matrix_text, const std::string& out) {
  const std::string path = h.WriteFile("m.yaml", matrix_text);
  const size_t run = h.Start("run", {"run", path, "--out", out});
  ASSERT_TRUE(Harness::WaitFor([&] { return h.process(run).Poll().has_value(); },
                               std::chrono::seconds(120)))
      << h.Log("run");
}

TEST(Telemetry, GpuSeriesSummaryAndProvenanceAreKeptWithTheRun) {
  Harness h("telemetry");
  PathWithFakeNvidiaSmi fake(h, true);
  const std::string out = h.Path("out");
  // About 3 s of measured load: 8 requests of ~0.75 s at concurrency 2.
  RunSweep(h, SimMatrix("telemetry", 1, 8, 2, 16, 5, 50), out);
  ASSERT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 1) << h.Log("run");
  // The fake's GPUs: 0 at 75 % / 40000 MiB / 300.5 W / 1980 MHz, 1 at 25 % / 20000 MiB / no
  // power / 1755 MHz.
  auto row = h.Query(out,
                     "SELECT gpu_telemetry, gpu_util_mean_pct, gpu_memory_used_max_mib, "
                     "gpu_power_mean_w, gpu_sm_clock_mean_mhz, driver_version, cuda_version "
                     "FROM results");
  ASSERT_EQ(row.rows.size(), 1u);
  EXPECT_EQ(row.rows[0][0].rfind("nvidia-smi: 2 GPU(s), ", 0), 0u) << row.rows[0][0];
  EXPECT_DOUBLE_EQ(std::stod(row.rows[0][1]), 50);
  EXPECT_DOUBLE_EQ(std::stod(row.rows[0][2]), 40000);
  EXPECT_DOUBLE_EQ(std::stod(row.rows[0][3]), 300.5);
  EXPECT_DOUBLE_EQ(std::stod(row.rows[0][4]), (1980 + 1755) / 2.0);
  EXPECT_EQ(row.rows[0][5], "570.86.15");
  EXPECT_EQ(row.rows[0][6], "12.8");
  // The series: one sample a second per GPU and figure, in the measured phase.
  const int64_t util0 =
      h.QueryInt(out, "SELECT COUNT(*) FROM engine_samples WHERE name='gpu0.util_pct'");
  EXPECT_GE(util0, 2);
  EXPECT_LE(util0, 8);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM engine_samples WHERE name='gpu1.power_w'"), 0);
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM engine_samples WHERE name='gpu1.util_pct' AND "
                       "value = 25"),
            util0);
  // Topology and the raw CSV beside the run's engine logs.
  EXPECT_EQ(FilesEndingWith(out, ".topo.txt"), 1);
  EXPECT_EQ(FilesEndingWith(out, ".gpu.csv"), 1);
  // Energy from the counters read around the measured phase: the fake's GPU 0 gains exactly
  // 250 J between two reads; the run holds GPU 0 only.
  auto energy = h.Query(out,
                        "SELECT energy_valid, energy_source, energy_j, energy_per_output_tok_j, "
                        "total_output_tokens, energy_per_request_j, completed, "
                        "energy_per_total_tok_j, total_input_tokens, energy_invalid_reason "
                        "FROM results");
  ASSERT_EQ(energy.rows.size(), 1u);
  const auto& e = energy.rows[0];
  EXPECT_EQ(e[0], "1") << e[9];
  EXPECT_EQ(e[1], "counter (GPU 0: 250.0 J)");
  EXPECT_EQ(std::stod(e[2]), 250);
  EXPECT_EQ(std::stod(e[3]), 250 / std::stod(e[4]));
  EXPECT_EQ(std::stod(e[5]), 250 / std::stod(e[6]));
  EXPECT_EQ(std::stod(e[7]), 250 / (std::stod(e[4]) + std::stod(e[8])));
  EXPECT_EQ(FilesEndingWith(out, ".energy-before.csv"), 1);
  // report.md puts joules per token beside tokens per GPU.
  const std::string report = ReadTextFile(out + "/report.md");
  EXPECT_NE(report.find("## Energy"), std::string::npos) << report;
  EXPECT_NE(report.find(fmt::format(" | {:.4g} | ", 250 / std::stod(e[4]))), std::string::npos)
      << report;
  // report.html plots it against the per-user speed (the energy frontier).
  EXPECT_NE(ReadTextFile(out + "/report.html").find("id=\"plot-energy\""), std::string::npos);
}

// The energy figure is refused, with why, when a GPU of the run has no counter and no power
// samples (the fake's GPU 1), and when power samples must stand in for a counter over a phase
// shorter than five of their intervals. The figures are recorded all the same.
TEST(Telemetry, EnergyIsInvalidWhenAGpuIsMissingOrTheWindowIsTooShort) {
  Harness h("energy-invalid");
  PathWithFakeNvidiaSmi fake(h, true);
  const std::string two_gpus = h.Path("two");
  RunSweep(h,
           SimMatrix("two-gpus", 1, 8, 2, 16, 5, 50, 2) + "local: {agents: 1, gpus_per_agent: 2}\n",
           two_gpus);
  auto row = h.Query(two_gpus, "SELECT energy_valid, energy_invalid_reason, energy_j FROM results");
  ASSERT_EQ(row.rows.size(), 1u) << h.Log("run");
  EXPECT_EQ(row.rows[0][0], "0");
  EXPECT_NE(row.rows[0][1].find("GPU 1 of the run: no energy counter (not reported) and no power "
                                "samples"),
            std::string::npos)
      << row.rows[0][1];
  EXPECT_EQ(row.rows[0][2], "");  // unknown: NULL
  // Invalid energy is tabled with why, never plotted.
  EXPECT_EQ(ReadTextFile(two_gpus + "/report.html").find("id=\"plot-energy\""), std::string::npos);
  ::setenv("FAKE_NVIDIA_SMI_NO_ENERGY", "1", 1);
  const std::string no_counter = h.Path("no-counter");
  RunSweep(h, SimMatrix("no-counter", 1, 8, 2, 16, 5, 50), no_counter);
  ::unsetenv("FAKE_NVIDIA_SMI_NO_ENERGY");
  row =
      h.Query(no_counter,
              "SELECT energy_valid, energy_invalid_reason, energy_source, duration_s FROM results");
  ASSERT_EQ(row.rows.size(), 1u) << h.Log("run");
  EXPECT_EQ(row.rows[0][0], "0");
  EXPECT_NE(row.rows[0][1].find("GPU 0 has no energy counter (nvidia-smi --query-gpu="),
            std::string::npos)
      << row.rows[0][1];
  EXPECT_NE(row.rows[0][1].find("is shorter than 5 power sampling intervals of 1000 ms"),
            std::string::npos)
      << row.rows[0][1];
  EXPECT_EQ(row.rows[0][2].rfind("power samples every 1000 ms (GPU 0: ", 0), 0u) << row.rows[0][2];
}

TEST(Telemetry, WithoutNvidiaSmiTheRecordSaysSo) {
  Harness h("no-telemetry");
  PathWithFakeNvidiaSmi none(h, false);
  const std::string out = h.Path("out");
  RunSweep(h, SimMatrix("no-telemetry", 1, 4, 2, 8, 5, 5), out);
  ASSERT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 1) << h.Log("run");
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE gpu_telemetry LIKE "
                       "'n/a: no nvidia-smi on agent %' AND gpu_util_mean_pct IS NULL"),
            1);
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE driver_version LIKE "
                       "'n/a: no nvidia-smi on agent %'"),
            1);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM engine_samples WHERE name LIKE 'gpu%'"), 0);
  // No energy either, and the reason is one line (it lands in summary.csv and report tables).
  const auto energy = h.Query(out, "SELECT energy_valid, energy_invalid_reason FROM results");
  ASSERT_EQ(energy.rows.size(), 1u);
  EXPECT_EQ(energy.rows[0][0], "0");
  EXPECT_NE(energy.rows[0][1].find("ended with exit 127: "), std::string::npos)
      << energy.rows[0][1];
  EXPECT_EQ(energy.rows[0][1].find('\n'), std::string::npos) << energy.rows[0][1];
}

// An engine that is healthy and lists its model but cannot generate fails readiness with the
// probe's reason; the sweep goes on with the next run.
TEST(Telemetry, AFailingProbeRequestFailsTheRunWithItsReason) {
  Harness h("probe");
  const std::string out = h.Path("out");
  RunSweep(h, R"(name: probe
engine: template
model: m
timeout_s: 20
max_attempts: 1
local: {agents: 1, gpus_per_agent: 1}
workload: {input_len: 8, output_len: 4, num_requests: 4, concurrency: 2}
axes:
  engine_config:
    - {command: ["{servesweep}", sim, --host, 127.0.0.1, --port, "{port}", --model, "{model}", --fault-error-rate, "1"]}
    - {command: ["{servesweep}", sim, --host, 127.0.0.1, --port, "{port}", --model, "{model}"]}
)",
           out);
  auto error_of = [&](int index) {
    auto table =
        h.Query(out, fmt::format("SELECT status, last_error FROM runs WHERE idx={}", index));
    return table.rows.empty() ? std::string("no run") : table.rows[0][0] + ": " + table.rows[0][1];
  };
  EXPECT_NE(error_of(0).find("failed: engine listed its model, but probe request to "),
            std::string::npos)
      << error_of(0);
  EXPECT_NE(error_of(0).find("answered HTTP 500"), std::string::npos) << error_of(0);
  EXPECT_EQ(error_of(1).rfind("done", 0), 0u) << error_of(1);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results WHERE cold_start_ms > 0"), 1);
}

}  // namespace
}  // namespace servesweep::testing

namespace servesweep::testing {
namespace {

// A run on two nodes (tp 2, one GPU per agent) counts both nodes' GPUs: the head asks the other
// agent, through the coordinator, to read its counters at each edge of the measured phase. The
// fake's GPU 0 gains 250 J per read on node a and 100 J on node b: 350 J in all, valid.
TEST(Telemetry, EnergyOfATwoNodeRunCountsEveryNodesGpus) {
  Harness h("energy-two-nodes");
  PathWithFakeNvidiaSmi fake(h, true);
  // About 7.5 s of measured load (3 waves of 2.5 s requests): long enough for the reads' round
  // trips through the coordinator (tens of ms) to stay within 5% of the phase.
  std::string text = SimMatrix("two-nodes", 1, 12, 4, 50, 5, 50, 2);
  text.replace(text.find("layout: {tp: 2}"), 15, "layout: {tp: 2, gpus_per_node: 1}");
  const std::string matrix = h.WriteFile("m.yaml", text);
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  const std::map<std::string, std::string> step_mj = {{"a", "250000"}, {"b", "100000"}};
  const size_t coordinator = StartCoordinatorAndAgents(
      h, matrix, endpoint, out, {"--heartbeat-ms", "100"}, {"a", "b"},
      [](const std::string&) {
        return std::vector<std::string>{"--heartbeat-ms", "100"};
      },
      [&](const std::string& id) {
        ::setenv("FAKE_NVIDIA_SMI_NODE", id.c_str(), 1);
        ::setenv("FAKE_NVIDIA_SMI_STEP_MJ", step_mj.at(id).c_str(), 1);
      });
  ::unsetenv("FAKE_NVIDIA_SMI_NODE");
  ::unsetenv("FAKE_NVIDIA_SMI_STEP_MJ");
  ASSERT_TRUE(Harness::WaitFor([&] { return h.process(coordinator).Poll().has_value(); },
                               std::chrono::seconds(90)))
      << h.Log("coordinator");
  const auto row = h.Query(out,
                           "SELECT r.status, e.energy_valid, e.energy_invalid_reason, e.energy_j, "
                           "e.energy_source FROM runs r JOIN results e USING (run_id)");
  ASSERT_EQ(row.rows.size(), 1u) << h.Log("coordinator");
  EXPECT_EQ(row.rows[0][0], "done");
  EXPECT_EQ(row.rows[0][1], "1") << row.rows[0][2] << "\n" << h.Log("a") << h.Log("b");
  EXPECT_DOUBLE_EQ(std::stod(row.rows[0][3]), 350);
  // Whichever agent was the head, the other's GPU is named with its node.
  EXPECT_TRUE(row.rows[0][4] == "counter (GPU 0: 250.0 J, GPU 0 on node b: 100.0 J)" ||
              row.rows[0][4] == "counter (GPU 0: 100.0 J, GPU 0 on node a: 250.0 J)")
      << row.rows[0][4];
  // The worker's reads lie beside its work, as the head's do.
  EXPECT_EQ(FilesEndingWith(h.Path("a/work"), ".energy-before.csv") +
                FilesEndingWith(h.Path("b/work"), ".energy-before.csv"),
            2);
}

// A disaggregated vLLM layout over two agents (prefill pool and decode pool) with their own
// addresses: the coordinator's assignment carries both, so the router on the head is given the
// decode instance at the second agent's address and reaches it there. Its two levels run on one
// engine, both agents keeping their parts between them. `vllm` and `vllm-router`
// are stand-ins (tests/data/fake-vllm*) serving the emulator; the processes, sockets, agents and
// coordinator are real.
TEST(Telemetry, DisaggregationOverTwoAgentsReachesTheDecodeAgentAtItsAddress) {
  Harness h("pd-two-agents");
  const std::string bin = h.Path("bin");
  std::filesystem::create_directories(bin);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"fake-vllm", "vllm"}, {"fake-vllm-router", "vllm-router"}}) {
    std::filesystem::copy_file(std::string(SERVESWEEP_SOURCE_DIR) + "/tests/data/" + from,
                               bin + "/" + to);
  }
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (bin + ":" + old_path).c_str(), 1);
  ::setenv("SERVESWEEP_TEST_BINARY", ServesweepBinary().c_str(), 1);
  const std::string router_args = h.Path("router.args");
  ::setenv("FAKE_ROUTER_ARGS", router_args.c_str(), 1);
  // Below Linux's ephemeral range (32768 and up), where a client socket of another test may hold
  // dist_port + 1 or + 2 for a moment (an "Address already in use" seen on a busy run).
  const int dist_port = 20000 + static_cast<int>(std::stoul(RandomHex(4), nullptr, 16) % 120) * 100;
  const std::string matrix = h.WriteFile("pd.yaml", fmt::format(R"(name: pd
engine: vllm
model: m
timeout_s: 40
max_attempts: 1
engine_config: {{dist_port: {}}}
layout: {{tp: 1, prefill_instances: 1, decode_instances: 1, gpus_per_node: 1}}
workload: {{input_len: 8, output_len: 4, num_requests: 4}}
axes: {{concurrency: [1, 2]}}
)",
                                                                dist_port));
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  // Their own pools and addresses: the prefill agent at 127.0.0.1, the decode one at 127.0.0.2.
  const size_t coordinator = StartCoordinatorAndAgents(
      h, matrix, endpoint, out, {}, {"agent-p", "agent-d"}, [](const std::string& id) {
        const bool prefill = id == "agent-p";
        return std::vector<std::string>{"--pool", prefill ? "prefill" : "decode", "--address",
                                        prefill ? "127.0.0.1" : "127.0.0.2"};
      });
  ::setenv("PATH", old_path.c_str(), 1);
  ASSERT_TRUE(Harness::WaitFor([&] { return h.process(coordinator).Poll().has_value(); },
                               std::chrono::seconds(90)))
      << h.Log("coordinator");
  auto status = h.Query(out, "SELECT status, last_error FROM runs");
  ASSERT_EQ(status.rows.size(), 2u);
  for (const auto& row : status.rows) {
    EXPECT_EQ(row[0], "done") << row[1] << "\n" << h.Log("agent-p");
  }
  std::ifstream in(router_args);
  std::string args((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(args.find(fmt::format("--prefill http://127.0.0.1:{}", dist_port + 1)),
            std::string::npos)
      << args;
  EXPECT_NE(args.find(fmt::format("--decode http://127.0.0.2:{}", dist_port + 2)),
            std::string::npos)
      << args;
  std::ifstream reached_file(router_args + ".reached");
  std::string reached((std::istreambuf_iterator<char>(reached_file)),
                      std::istreambuf_iterator<char>());
  EXPECT_NE(reached.find(fmt::format("reached http://127.0.0.2:{}", dist_port + 2)),
            std::string::npos)
      << reached;
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE pd_split = '1P1D' AND "
                       "completed = 4 AND agents = 'agent-p agent-d'"),
            2);
  // Both levels on one engine, its decode instance kept up on the second agent between them:
  // that agent started its part once (one worker log), told to keep it when released.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(DISTINCT engine_id) FROM results"), 1);
  EXPECT_EQ(FilesEndingWith(h.Path("agent-d/work"), ".log"), 1);
  EXPECT_NE(h.Log("agent-d").find("(keeping the engine)"), std::string::npos);
  EXPECT_NE(h.Log("agent-d").find("worker reuses engine part"), std::string::npos);
}

}  // namespace
}  // namespace servesweep::testing
