// End-to-end: a coordinator and agents as separate processes talking ZeroMQ over loopback,
// engines (the emulator) started by the agents, results committed to SQLite. Faults are real:
// SIGKILL of an agent or of the coordinator.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "matrix/matrix_loader.h"
#include "tests/support/harness.h"
#include "transport/curve_keys.h"
#include "transport/envelope_codec.h"

namespace servesweep::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Fast liveness so faults are noticed in well under a second.
const std::vector<std::string> kFastHeartbeat = {"--heartbeat-ms", "100", "--liveness", "3"};

std::vector<std::string> Args(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

size_t StartCoordinator(Harness& h, const std::string& log, const std::string& matrix,
                        const std::string& endpoint, const std::string& out,
                        std::vector<std::string> extra = {}) {
  auto args = Args({"coordinator", matrix, "--bind", endpoint, "--out", out}, kFastHeartbeat);
  return h.Start(log, Args(Args(args, h.CoordinatorKeyArgs()), extra));
}

size_t StartAgent(Harness& h, const std::string& id, const std::string& endpoint) {
  return h.Start(id, Args({"agent", "--connect", endpoint, "--id", id, "--emulate-gpus", "1",
                           "--spool", h.Path(id + "/spool"), "--work-dir", h.Path(id + "/work"),
                           "--reconnect-max-ms", "500"},
                          Args(kFastHeartbeat, h.AgentKeyArgs())));
}

// A scratch folder, a coordinator endpoint, an output folder and a matrix for one test.
struct Sweep {
  Sweep(const std::string& name, const std::string& matrix_text)
      : h(name),
        endpoint(fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort())),
        out(h.Path("out")),
        matrix(h.WriteFile("m.yaml", matrix_text)) {}
  Harness h;
  std::string endpoint, out, matrix;
};

// Every planned run is in the results exactly once and complete.
void ExpectEveryRunOnce(Harness& h, const std::string& out, int runs, int num_requests) {
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), runs);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results"), runs);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(DISTINCT run_id) FROM results"), runs);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM requests"), int64_t{runs} * num_requests);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results WHERE completed != " +
                                std::to_string(num_requests)),
            0);
}

TEST(SweepEndToEnd, CoordinatorAndTwoAgentsCompleteASweep) {
  Sweep s("sweep", SimMatrix("two", 4, 12, 2, 8, 5, 2));
  Harness& h = s.h;
  const std::string& endpoint = s.endpoint;
  const std::string& out = s.out;
  const std::string& matrix = s.matrix;
  const size_t coordinator = StartCoordinator(h, "coordinator", matrix, endpoint, out);
  const size_t a = StartAgent(h, "agent-a", endpoint);
  const size_t b = StartAgent(h, "agent-b", endpoint);
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 0) << h.Log("coordinator");
  ExpectEveryRunOnce(h, out, 4, 12);
  // Both agents took part, and both left on the coordinator's bye.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(DISTINCT agent_id) FROM results"), 2);
  EXPECT_EQ(ExitCode(h.process(a), seconds(10)), 0);
  EXPECT_EQ(ExitCode(h.process(b), seconds(10)), 0);
  // The record carries conditions and figures, not blanks.
  const auto rows = h.Query(out,
                            "SELECT model, engine, gpu_model, arrival, ttft_median_ms, "
                            "itl_median_ms FROM results");
  ASSERT_EQ(rows.rows.size(), 4u);
  for (const auto& row : rows.rows) {
    EXPECT_EQ(row[0], "test-model");
    EXPECT_EQ(row[1], "sim");
    EXPECT_EQ(row[2], "emulated");
    EXPECT_EQ(row[3], "closed-loop");
    EXPECT_NEAR(std::stod(row[4]), 5.0, 3.0);
    EXPECT_NEAR(std::stod(row[5]), 2.0, 1.0);
  }
}

TEST(SweepEndToEnd, MultiNodeLayoutUsesHeadAndWorker) {
  Sweep s("multinode", SimMatrix("tp2", 2, 8, 2, 8, 5, 2, /*tp=*/2));
  Harness& h = s.h;
  const std::string& endpoint = s.endpoint;
  const std::string& out = s.out;
  const std::string& matrix = s.matrix;
  const size_t coordinator = StartCoordinator(h, "coordinator", matrix, endpoint, out);
  StartAgent(h, "agent-a", endpoint);
  StartAgent(h, "agent-b", endpoint);
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 0) << h.Log("coordinator");
  ExpectEveryRunOnce(h, out, 2, 8);
  // Each run was placed on both agents, head first; the record counts both GPUs.
  const auto rows = h.Query(out, "SELECT agents, gpu_count FROM results");
  for (const auto& row : rows.rows) {
    EXPECT_EQ(row[0], "agent-a agent-b");
    EXPECT_EQ(row[1], "2");
  }
}

TEST(SweepEndToEnd, KilledAgentsRunIsRequeuedAndCompletedByAnother) {
  Harness h("agentkill");
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  // Runs of ~1.5 s each (concurrency 1, 40 requests of ~37 ms) so one is surely mid-flight.
  const std::string matrix = h.WriteFile("m.yaml", SimMatrix("kill", 3, 40, 1, 8, 10, 4));
  const size_t coordinator = StartCoordinator(h, "coordinator", matrix, endpoint, out);
  const size_t victim = StartAgent(h, "agent-victim", endpoint);
  ASSERT_TRUE(Harness::WaitFor(
      [&] {
        return h.QueryInt(out,
                          "SELECT COUNT(*) FROM attempts WHERE outcome='running' AND "
                          "agents='agent-victim'") == 1;
      },
      seconds(20)));
  std::this_thread::sleep_for(milliseconds(300));  // well inside the run
  const std::string victim_run =
      h.Query(out, "SELECT run_id FROM attempts WHERE agents='agent-victim'").rows.at(0).at(0);
  h.process(victim).Signal(SIGKILL);
  StartAgent(h, "agent-survivor", endpoint);
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(90)), 0) << h.Log("coordinator");

  ExpectEveryRunOnce(h, out, 3, 40);
  EXPECT_EQ(h.QueryInt(out, fmt::format("SELECT COUNT(*) FROM attempts WHERE run_id='{}' AND "
                                        "outcome='lost' AND agents='agent-victim'",
                                        victim_run)),
            1);
  EXPECT_EQ(h.Query(out, fmt::format("SELECT agent_id FROM results WHERE run_id='{}'", victim_run))
                .rows.at(0)
                .at(0),
            "agent-survivor");
  // Only the victim's run was retried, once.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE attempts > 1"), 1);
}

TEST(SweepEndToEnd, RestartedCoordinatorResumesWithoutRedoingFinishedRuns) {
  Sweep s("resume", SimMatrix("resume", 6, 20, 1, 8, 10, 4));
  Harness& h = s.h;
  const std::string& endpoint = s.endpoint;
  const std::string& out = s.out;
  const std::string& matrix = s.matrix;
  size_t coordinator = StartCoordinator(h, "coordinator-1", matrix, endpoint, out);
  StartAgent(h, "agent-a", endpoint);
  StartAgent(h, "agent-b", endpoint);
  ASSERT_TRUE(Harness::WaitFor([&] { return h.QueryInt(out, "SELECT COUNT(*) FROM results") >= 2; },
                               seconds(30)));
  h.process(coordinator).Signal(SIGKILL);
  h.process(coordinator).Wait(seconds(5));
  const auto before = h.Query(out, "SELECT run_id, committed_unix_ms FROM results ORDER BY run_id");
  ASSERT_GE(before.rows.size(), 2u);
  ASSERT_LT(before.rows.size(), 6u);

  // Without --resume the folder is refused, and nothing in it changes.
  const size_t refused = StartCoordinator(h, "coordinator-refused", matrix, endpoint, out);
  EXPECT_EQ(ExitCode(h.process(refused), seconds(10)), 1);
  EXPECT_NE(h.Log("coordinator-refused").find("--resume"), std::string::npos);

  coordinator = StartCoordinator(h, "coordinator-2", matrix, endpoint, out, {"--resume"});
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(90)), 0) << h.Log("coordinator-2");
  ExpectEveryRunOnce(h, out, 6, 20);
  // The runs finished before the kill were neither redone nor rewritten.
  for (const auto& row : before.rows) {
    EXPECT_EQ(
        h.Query(out, fmt::format("SELECT committed_unix_ms FROM results WHERE run_id='{}'", row[0]))
            .rows.at(0)
            .at(0),
        row[1]);
    EXPECT_EQ(
        h.QueryInt(out, fmt::format("SELECT COUNT(*) FROM attempts WHERE run_id='{}'", row[0])), 1);
  }
}

TEST(SweepEndToEnd, MalformedAndOversizedFramesAreDroppedWithoutACrash) {
  Sweep s("frames", SimMatrix("frames", 2, 10, 2, 8, 5, 2));
  Harness& h = s.h;
  const std::string& endpoint = s.endpoint;
  const std::string& out = s.out;
  const std::string& matrix = s.matrix;
  const size_t coordinator =
      StartCoordinator(h, "coordinator", matrix, endpoint, out, {"--max-frame-bytes", "1048576"});

  std::string server_public;
  CurveKeypair agent_keys;
  ASSERT_TRUE(ReadCurvePublicKey(h.KeyPath("coordinator", "pub"), &server_public).ok());
  ASSERT_TRUE(ReadCurveSecretKey(h.KeyPath("agent", "secret"), &agent_keys).ok());
  zmq::context_t context(1);
  auto send_from = [&](const std::string& identity, std::vector<std::string> frames) {
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::routing_id, identity);
    dealer.set(zmq::sockopt::linger, 2000);
    // An admitted peer (the agents' key) that sends garbage: the frame checks still hold.
    dealer.set(zmq::sockopt::curve_serverkey, server_public);
    dealer.set(zmq::sockopt::curve_publickey, agent_keys.public_z85);
    dealer.set(zmq::sockopt::curve_secretkey, agent_keys.secret_z85);
    dealer.connect(endpoint);
    for (size_t i = 0; i < frames.size(); ++i) {
      dealer.send(zmq::buffer(frames[i]),
                  i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    dealer.close();  // linger flushes the frames first
  };
  send_from("garbage-1", {""});                          // empty frame
  send_from("garbage-2", {"1234567"});                   // not a multiple of 8
  send_from("garbage-3", {std::string(64, '\xff')});     // bad segment table
  send_from("garbage-4", {std::string(16, '\0'), "x"});  // two frames
  send_from("garbage-5", {std::string(2 << 20, 'a')});   // over --max-frame-bytes
  {
    capnp::MallocMessageBuilder message;  // wrong protocol version
    auto envelope = message.initRoot<schema::Envelope>();
    envelope.setProtocolVersion(99);
    envelope.initHeartbeat();
    auto bytes = capnp::messageToFlatArray(message);
    send_from("garbage-6", {std::string(bytes.asChars().begin(), bytes.asChars().size())});
  }
  {
    capnp::MallocMessageBuilder message;  // hello with another identity
    auto hello = NewEnvelope(message).initHello();
    hello.initInventory().setAgentId("someone-else");
    auto bytes = capnp::messageToFlatArray(message);
    send_from("garbage-7", {std::string(bytes.asChars().begin(), bytes.asChars().size())});
  }
  ASSERT_TRUE(Harness::WaitFor(
      [&] {
        const std::string log = h.Log("coordinator");
        size_t dropped = 0;
        for (size_t at = log.find("dropped"); at != std::string::npos;
             at = log.find("dropped", at + 1)) {
          ++dropped;
        }
        return dropped >= 5;
      },
      seconds(10)))
      << h.Log("coordinator");
  EXPECT_FALSE(h.process(coordinator).Poll().has_value()) << "coordinator died";

  // Still serving: real agents complete the sweep.
  StartAgent(h, "agent-a", endpoint);
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 0) << h.Log("coordinator");
  ExpectEveryRunOnce(h, out, 2, 10);
}

TEST(SweepEndToEnd, EngineThatNeverGetsReadyIsRetriedThenFailedWhileOthersFinish) {
  // Run 0's emulator stays unready past its timeout; run 1 is healthy.
  Sweep s("notready", R"(name: notready
engine: sim
model: test-model
max_attempts: 2
timeout_s: 1
workload: {input_len: 8, output_len: 4, num_requests: 5, concurrency: 1}
axes:
  sim: [{ttft_ms: 1, itl_ms: 1, startup_ms: 60000}, {ttft_ms: 1, itl_ms: 1}]
)");
  Harness& h = s.h;
  const size_t coordinator = StartCoordinator(h, "coordinator", s.matrix, s.endpoint, s.out);
  StartAgent(h, "agent-a", s.endpoint);
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 2) << h.Log("coordinator");
  EXPECT_EQ(h.QueryInt(s.out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 1);
  const auto failed = h.Query(s.out, "SELECT attempts, last_error FROM runs WHERE status='failed'");
  ASSERT_EQ(failed.rows.size(), 1u);
  EXPECT_EQ(failed.rows[0][0], "2");
  // The agent's watchdog or the readiness wait, whichever notices first.
  EXPECT_NE(failed.rows[0][1].find("after 1 s"), std::string::npos) << failed.rows[0][1];
  // The failure is in the results with its conditions and without figures.
  EXPECT_EQ(h.QueryInt(s.out,
                       "SELECT COUNT(*) FROM results WHERE result_status='failed' AND "
                       "model='test-model' AND output_throughput IS NULL"),
            1);
  std::ifstream report(s.out + "/report.md");
  std::stringstream text;
  text << report.rdbuf();
  EXPECT_NE(text.str().find("## Runs not done"), std::string::npos);
}

TEST(SweepEndToEnd, PreflightProbesLeaveAnUnhealthyNodeOut) {
  Sweep s("probes", R"(name: probes
engine: sim
model: test-model
sim: {ttft_ms: 2, itl_ms: 1}
workload: {input_len: 8, output_len: 4, num_requests: 5, concurrency: 1}
probes: {enabled: true, exclude_unhealthy: true, repeats: 1}
axes:
  concurrency: [1, 2, 3, 4]
)");
  Harness& h = s.h;
  const size_t coordinator = StartCoordinator(h, "coordinator", s.matrix, s.endpoint, s.out);
  // Two emulated H200 nodes: one healthy, one whose HBM reaches 2000 of the 4320 GB/s expected.
  auto start = [&](const std::string& id, const std::string& figures) {
    return h.Start(
        id, Args({"agent", "--connect", s.endpoint, "--id", id, "--emulate-gpus", "1", "--spool",
                  h.Path(id + "/spool"), "--work-dir", h.Path(id + "/work"), "--emulated-gpu-name",
                  "NVIDIA H200", "--emulated-probe-figures", figures},
                 Args(kFastHeartbeat, h.AgentKeyArgs())));
  };
  start("agent-healthy", "hbm.triad=4300,gemm.bf16=760");
  start("agent-sick", "hbm.triad=2000,gemm.bf16=760");
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 0) << h.Log("coordinator");
  ExpectEveryRunOnce(h, s.out, 4, 5);
  EXPECT_EQ(h.QueryInt(s.out, "SELECT COUNT(*) FROM results WHERE agent_id != 'agent-healthy'"), 0);
  EXPECT_EQ(
      h.QueryInt(s.out, "SELECT excluded FROM node_probe_reports WHERE agent_id='agent-sick'"), 1);
  EXPECT_EQ(
      h.QueryInt(s.out, "SELECT healthy FROM node_probe_reports WHERE agent_id='agent-healthy'"),
      1);
  const auto flagged = h.Query(s.out,
                               "SELECT name, verdict, value, expected FROM node_probes "
                               "WHERE agent_id='agent-sick' AND verdict != 'ok'");
  ASSERT_EQ(flagged.rows.size(), 1u);
  EXPECT_EQ(flagged.rows[0][0], "hbm.triad");
  EXPECT_EQ(flagged.rows[0][1], "below_spec");
  EXPECT_EQ(std::stod(flagged.rows[0][3]), 4320.0);
  std::ifstream report(s.out + "/report.md");
  std::stringstream text;
  text << report.rdbuf();
  EXPECT_NE(text.str().find("| agent-sick | NVIDIA H200 | emulated | **no** | **left out** |"),
            std::string::npos)
      << text.str();
}

TEST(SweepEndToEnd, TraceReplaySendsEachRequestAtItsTimeWithItsLengths) {
  Harness h("trace-replay");
  const std::string out = h.Path("out");
  const size_t run =
      h.Start("run", {"run", SERVESWEEP_SOURCE_DIR "/examples/trace-replay.yaml", "--out", out});
  ASSERT_EQ(ExitCode(h.process(run), seconds(60)), 0) << h.Log("run");
  // The emulator counts every prompt word and emits exactly max_tokens: the trace's lengths.
  const std::vector<std::pair<int, int>> trace_head = {{374, 44}, {396, 109}, {879, 55}, {91, 16}};
  const auto rows = h.Query(out,
                            "SELECT prompt_tokens, output_tokens, scheduled_ns FROM requests "
                            "ORDER BY idx LIMIT 4");
  ASSERT_EQ(rows.rows.size(), 4u);
  for (size_t i = 0; i < trace_head.size(); ++i) {
    EXPECT_EQ(std::stoi(rows.rows[i][0]), trace_head[i].first) << i;
    EXPECT_EQ(std::stoi(rows.rows[i][1]), trace_head[i].second) << i;
  }
  // Request 1 arrives 4.314579 s after request 0 in the trace, replayed 20x faster.
  EXPECT_EQ(std::stoll(rows.rows[1][2]) - std::stoll(rows.rows[0][2]), 4'314'579'000 / 20);
  EXPECT_EQ(h.QueryInt(out, "SELECT completed FROM results"), 20);
  EXPECT_EQ(h.Query(out, "SELECT arrival FROM results").rows.at(0).at(0), "trace x20");
}

TEST(SweepEndToEnd, LengthDistributionsSendTheSampledLengths) {
  const std::string text = R"(name: dist
engine: sim
model: test-model
sim: {ttft_ms: 2, itl_ms: 1}
workload:
  input_len: {distribution: uniform, low: 5, high: 50}
  output_len: {distribution: normal, mean: 6, std: 2, min: 1}
  num_requests: 20
  concurrency: 4
  seed: 3
local: {agents: 1, gpus_per_agent: 1}
)";
  Harness h("dist");
  const std::string matrix = h.WriteFile("m.yaml", text);
  const std::string out = h.Path("out");
  const size_t run = h.Start("run", {"run", matrix, "--out", out});
  ASSERT_EQ(ExitCode(h.process(run), seconds(60)), 0) << h.Log("run");
  matrix::LoadedMatrix expanded;
  ASSERT_TRUE(matrix::ExpandMatrix(matrix, text, &expanded).ok());
  const auto plan = expanded.matrix().getRuns()[0].getWorkload().getPlan();
  const auto rows = h.Query(out, "SELECT prompt_tokens, output_tokens FROM requests ORDER BY idx");
  ASSERT_EQ(rows.rows.size(), plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(std::stoul(rows.rows[i][0]), plan[i].getInputLenTok()) << i;
    EXPECT_EQ(std::stoul(rows.rows[i][1]), plan[i].getOutputLenTok()) << i;
  }
  const auto dists = h.Query(out, "SELECT input_len_dist, output_len_dist, arrival FROM results");
  EXPECT_EQ(dists.rows.at(0).at(0).rfind("uniform:5-50 mean:", 0), 0u) << dists.rows[0][0];
  EXPECT_EQ(dists.rows.at(0).at(1).rfind("normal:6+-2 mean:", 0), 0u) << dists.rows[0][1];
  EXPECT_EQ(dists.rows.at(0).at(2), "closed-loop");
}

TEST(CommandLine, ProbeReportsDevicesOrNoGpuCleanly) {
  Harness h("probe");
  const size_t probe = h.Start("probe", {"probe", "--json"});
  ASSERT_EQ(ExitCode(h.process(probe), seconds(300)), 0) << h.Log("probe");
  const auto report = nlohmann::json::parse(h.Log("probe"));
  if (report.at("status") == "ok") {
    // On a GPU machine: every figure measured, and judged.
    EXPECT_FALSE(report.at("figures").empty());
    for (const auto& f : report.at("figures")) EXPECT_NE(f.at("status"), "failed") << f.dump();
  } else {
    EXPECT_EQ(report.at("status"), "no_gpu") << report.dump();
    EXPECT_TRUE(report.at("figures").empty());
  }
}

#ifdef SERVESWEEP_HAVE_STANDALONE_PROBES
TEST(CommandLine, StandaloneProbesSayNoGpuCleanly) {
  std::string output;
  const int gpu =
      RunShell(SERVESWEEP_BUILD_DIR "/servesweep-gpu-probe --devices-only --json", &output);
  const auto report = nlohmann::json::parse(output);
  if (report.at("status") != "no_gpu") GTEST_SKIP() << "a GPU is present: see scripts/gpu-check.sh";
  EXPECT_EQ(gpu, 0) << output;
  EXPECT_EQ(RunShell(SERVESWEEP_BUILD_DIR "/servesweep-nccl-probe-local", &output) >> 8, 2)
      << output;
  EXPECT_EQ(output, "{\"probe\":\"nccl\",\"status\":\"no_gpu\"}\n");
}
#endif

TEST(CommandLine, BadMatrixFailsBeforeStartingAnything) {
  Harness h("badmatrix");
  const std::string matrix =
      h.WriteFile("bad.yaml", "name: x\nengine: sim\nmodel: m\nconcurency: 4\n");
  const size_t run = h.Start("run", {"run", matrix, "--out", h.Path("out")});
  ASSERT_EQ(ExitCode(h.process(run), seconds(30)), 1);
  EXPECT_NE(h.Log("run").find(matrix + ":4:1: unknown key 'concurency'"), std::string::npos)
      << h.Log("run");
  EXPECT_FALSE(std::filesystem::exists(h.Path("out/results.db")));
}

TEST(CommandLine, BenchWritesVllmCompatibleJson) {
  Harness h("bench");
  const uint16_t port = FreeLoopbackPort();
  h.Start("sim", {"sim", "--port", std::to_string(port), "--model", "m", "--ttft-ms", "5",
                  "--itl-ms", "1"});
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  ASSERT_TRUE(Harness::WaitForHealthy(url));
  const std::string json_path = h.Path("result.json");
  const size_t bench = h.Start(
      "bench", {"bench", "--url", url, "--model", "m", "--concurrency", "4", "--num-requests", "20",
                "--input-len", "8", "--output-len", "6", "--result-json", json_path});
  ASSERT_EQ(ExitCode(h.process(bench), seconds(30)), 0) << h.Log("bench");
  std::ifstream in(json_path);
  const auto json = nlohmann::json::parse(in);
  EXPECT_EQ(json.at("completed"), 20);
  EXPECT_EQ(json.at("failed"), 0);
  EXPECT_EQ(json.at("total_output_tokens"), 120);
  EXPECT_EQ(json.at("total_input_tokens"), 160);
  for (const char* key : {"duration", "request_throughput", "output_throughput",
                          "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms",
                          "p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "mean_e2el_ms"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_NEAR(json.at("median_ttft_ms").get<double>(), 5.0, 2.0);
  EXPECT_NE(h.Log("bench").find("Serving Benchmark Result"), std::string::npos);

  // Token-id prompts: the emulator counts the ids, so the input lengths stay exact.
  const std::string ids_json = h.Path("ids.json");
  const size_t ids =
      h.Start("bench-ids", {"bench", "--url", url, "--model", "m", "--concurrency", "4",
                            "--num-requests", "10", "--input-len", "33", "--output-len", "3",
                            "--token-id-prompts", "--result-json", ids_json});
  ASSERT_EQ(ExitCode(h.process(ids), seconds(30)), 0) << h.Log("bench-ids");
  std::ifstream ids_in(ids_json);
  EXPECT_EQ(nlohmann::json::parse(ids_in).at("total_input_tokens"), 330);
}

}  // namespace
}  // namespace servesweep::testing
