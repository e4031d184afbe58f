// End-to-end faults beyond a killed process: a node's network cut and restored (a network
// namespace joined by a veth pair), a full spool disk (a tiny tmpfs), a stopped agent
// (SIGSTOP/SIGCONT), an engine that dies mid-stream. Coordinator, agents and engines are separate
// processes over real sockets; at the end every planned run is in the database exactly once.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <thread>

#include "tests/support/harness.h"
#include "tests/support/network_namespace.h"
#include "tests/support/tmpfs_mount.h"

namespace servesweep::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Liveness 2 s: long enough that a 0.4 s cut (TCP retransmits within ~0.6 s) is not silence on a
// loaded 2-core machine, short enough that a 5 s cut surely is.
constexpr int kHeartbeatMs = 200;
constexpr int kLiveness = 10;
const std::vector<std::string> kHeartbeat = {"--heartbeat-ms", std::to_string(kHeartbeatMs),
                                             "--liveness", std::to_string(kLiveness)};

size_t StartAgent(Harness& h, const std::string& id, const std::string& endpoint,
                  const std::vector<std::string>& wrapper = {}, const std::string& spool = "") {
  return h.Start(id,
                 Concat({"agent", "--connect", endpoint, "--id", id, "--emulate-gpus", "1",
                         "--spool", spool.empty() ? h.Path(id + "/spool") : spool, "--work-dir",
                         h.Path(id + "/work"), "--reconnect-max-ms", "500"},
                        Concat(kHeartbeat, h.AgentKeyArgs())),
                 wrapper);
}

size_t StartCoordinator(Harness& h, const std::string& matrix, const std::string& bind,
                        const std::string& out) {
  return h.Start("coordinator",
                 Concat(Concat({"coordinator", matrix, "--bind", bind, "--out", out}, kHeartbeat),
                        h.CoordinatorKeyArgs()));
}

// Every planned run is in the database exactly once, done, with all its requests.
void ExpectEveryRunDoneOnce(Harness& h, const std::string& out, int runs, int num_requests) {
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs"), runs);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), runs);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results"), runs);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(DISTINCT run_id) FROM results"), runs);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM requests"), int64_t{runs} * num_requests);
  EXPECT_EQ(h.QueryInt(out, fmt::format("SELECT COUNT(*) FROM results WHERE completed != {}",
                                        num_requests)),
            0);
}

// Whether one line of `log` holds every needle.
bool LogHasLine(const std::string& log, const std::vector<std::string>& needles) {
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string_view line(log.data() + start, end - start);
    if (std::all_of(needles.begin(), needles.end(),
                    [&](const std::string& n) { return line.find(n) != line.npos; })) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

size_t SpooledFiles(const std::string& dir) {
  size_t files = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    files += entry.is_regular_file() ? 1 : 0;
  }
  return files;
}

// The run an agent is busy with (its attempt still running), or "" after `timeout`.
std::string WaitForRunningOn(Harness& h, const std::string& out, const std::string& agent,
                             seconds timeout) {
  std::string run_id;
  Harness::WaitFor(
      [&] {
        const auto rows = h.Query(
            out, fmt::format("SELECT run_id FROM attempts WHERE outcome='running' AND agents='{}'",
                             agent));
        if (!rows.rows.empty()) run_id = rows.rows[0][0];
        return !run_id.empty();
      },
      timeout);
  return run_id;
}

// A sweep of `runs` runs of ~1.5 s each (40 requests of ~38 ms, one at a time), so that a fault
// lands in the middle of one.
struct SlowRunSweep {
  explicit SlowRunSweep(const std::string& name, int runs = 6)
      : h(name),
        port(FreeLoopbackPort()),
        out(h.Path("out")),
        matrix(h.WriteFile("m.yaml", SimMatrix(name, runs, kRequests, 1, 8, 10, 4))) {}
  static constexpr int kRequests = 40;
  Harness h;
  uint16_t port;
  std::string out, matrix;
};

// The node's link goes down for longer than the liveness window, mid-run, and comes back.
TEST(Faults, NetworkCutPastTheTimeoutLosesNothingAndTheAgentRejoins) {
  NetworkNamespace net;  // declared before the harness: its processes end before the namespace
  if (Status s = net.Create("cut"); !s.ok()) {
    GTEST_SKIP() << "network namespaces not permitted here (needs root / CAP_NET_ADMIN): "
                 << s.message();
  }
  // Enough runs that the sweep outlasts the cut and the far agent's return.
  SlowRunSweep s("netcut", 10);
  Harness& h = s.h;
  // Bound on every address: the near agent uses loopback, the far one the veth pair.
  const size_t coordinator =
      StartCoordinator(h, s.matrix, fmt::format("tcp://0.0.0.0:{}", s.port), s.out);
  const size_t far = StartAgent(
      h, "agent-far", fmt::format("tcp://{}:{}", net.host_address(), s.port), net.ExecPrefix());
  const std::string victim = WaitForRunningOn(h, s.out, "agent-far", seconds(30));
  ASSERT_FALSE(victim.empty()) << h.Log("agent-far") << h.Log("coordinator");
  const size_t near = StartAgent(h, "agent-near", fmt::format("tcp://127.0.0.1:{}", s.port));
  std::this_thread::sleep_for(milliseconds(300));  // inside the ~1.5 s run

  ASSERT_TRUE(net.Cut().ok());
  // The coordinator gives up on the far agent and re-queues its run; the far agent finishes
  // the run meanwhile (its engine is local) and spools the result.
  EXPECT_TRUE(Harness::WaitFor(
      [&] {
        return h.QueryInt(s.out, fmt::format("SELECT COUNT(*) FROM attempts WHERE run_id='{}' AND "
                                             "outcome='lost' AND agents='agent-far'",
                                             victim)) == 1;
      },
      seconds(8)))
      << h.Log("coordinator");
  std::this_thread::sleep_for(milliseconds(1500));  // the cut lasts past the run's end
  ASSERT_TRUE(net.Restore().ok());

  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(90)), 0) << h.Log("coordinator");
  ExpectEveryRunDoneOnce(h, s.out, 10, SlowRunSweep::kRequests);
  const std::string log = h.Log("coordinator");
  // The far agent's measurement arrived after the restore: committed, or dropped as a duplicate
  // of the retry's (whichever came first); at-least-once delivery, exactly-once commit.
  const bool committed =
      LogHasLine(log, {fmt::format("run {} [", victim), "done by agent-far (attempt 1)"});
  const bool duplicate = LogHasLine(
      log, {fmt::format("dropped a duplicate result for {} (attempt 1) from agent-far", victim)});
  EXPECT_TRUE(committed || duplicate) << log;
  EXPECT_NE(h.Log("agent-far").find("reconnecting"), std::string::npos) << h.Log("agent-far");
  // Rejoined: it said hello again and left on the coordinator's bye; its spool is empty (every
  // result acknowledged).
  EXPECT_EQ(ExitCode(h.process(far), seconds(15)), 0) << h.Log("agent-far");
  EXPECT_EQ(ExitCode(h.process(near), seconds(15)), 0) << h.Log("agent-near");
  EXPECT_EQ(SpooledFiles(h.Path("agent-far/spool")), 0u);
  // Only the victim run needed another attempt.
  EXPECT_LE(h.QueryInt(s.out, "SELECT COUNT(*) FROM runs WHERE attempts > 1"), 1);
  // (Its 'lost' attempt became 'committed' if its late result won the race.)
  EXPECT_LE(h.QueryInt(s.out, "SELECT COUNT(*) FROM attempts WHERE outcome='lost'"), 1);
}

// A cut shorter than the liveness window: TCP retransmits, nobody is declared lost.
TEST(Faults, ShortNetworkCutCausesNoRetry) {
  NetworkNamespace net;
  if (Status s = net.Create("blip"); !s.ok()) {
    GTEST_SKIP() << "network namespaces not permitted here (needs root / CAP_NET_ADMIN): "
                 << s.message();
  }
  SlowRunSweep s("netblip", 4);
  Harness& h = s.h;
  const size_t coordinator =
      StartCoordinator(h, s.matrix, fmt::format("tcp://{}:{}", net.host_address(), s.port), s.out);
  const size_t far = StartAgent(
      h, "agent-far", fmt::format("tcp://{}:{}", net.host_address(), s.port), net.ExecPrefix());
  ASSERT_FALSE(WaitForRunningOn(h, s.out, "agent-far", seconds(30)).empty()) << h.Log("agent-far");
  for (int cut = 0; cut < 3; ++cut) {  // three blips, 1 s apart
    std::this_thread::sleep_for(milliseconds(600));
    ASSERT_TRUE(net.Cut().ok());
    std::this_thread::sleep_for(milliseconds(400));
    ASSERT_TRUE(net.Restore().ok());
  }
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(90)), 0) << h.Log("coordinator");
  ExpectEveryRunDoneOnce(h, s.out, 4, SlowRunSweep::kRequests);
  EXPECT_EQ(h.QueryInt(s.out, "SELECT COUNT(*) FROM attempts"), 4);
  EXPECT_EQ(h.QueryInt(s.out, "SELECT MAX(attempts) FROM runs"), 1);
  EXPECT_EQ(h.Log("coordinator").find("agent agent-far lost"), std::string::npos)
      << h.Log("coordinator");
  EXPECT_EQ(h.Log("agent-far").find("reconnecting"), std::string::npos) << h.Log("agent-far");
  EXPECT_EQ(ExitCode(h.process(far), seconds(15)), 0) << h.Log("agent-far");
}

// The agent's spool is on a full disk: every result still goes (from memory), with a clear
// error per run, and the sweep completes; no partial file is left.
TEST(Faults, FullSpoolDiskStillDeliversEveryResult) {
  SlowRunSweep s("spoolfull", 3);
  Harness& h = s.h;
  TmpfsMount disk;
  if (Status st = disk.Mount(h.Path("agent-a-disk"), 64 * 1024); !st.ok()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN): " << st.message();
  }
  const std::string spool = disk.path() + "/spool";
  std::filesystem::create_directories(spool);
  size_t filler_bytes = 0;
  ASSERT_TRUE(disk.Fill("filler", &filler_bytes).ok());
  ASSERT_GT(filler_bytes, 0u);

  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", s.port);
  const size_t coordinator = StartCoordinator(h, s.matrix, endpoint, s.out);
  const size_t agent = StartAgent(h, "agent-a", endpoint, {}, spool);
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(90)), 0) << h.Log("coordinator");
  ExpectEveryRunDoneOnce(h, s.out, 3, SlowRunSweep::kRequests);
  EXPECT_EQ(ExitCode(h.process(agent), seconds(15)), 0) << h.Log("agent-a");
  const std::string log = h.Log("agent-a");
  size_t full_errors = 0;
  for (size_t at = log.find("spool full: "); at != std::string::npos;
       at = log.find("spool full: ", at + 1)) {
    ++full_errors;
  }
  EXPECT_EQ(full_errors, 3u) << log;
  EXPECT_NE(log.find("No space left on device"), std::string::npos) << log;
  EXPECT_EQ(SpooledFiles(spool), 0u);  // no partial .tmp left behind
}

// An agent stopped (SIGSTOP) mid-run past the liveness window: its run goes to another agent;
// when it continues (SIGCONT) it distrusts what it measured while frozen, so its late report is
// history only; it rejoins, and nothing is counted twice.
TEST(Faults, StoppedAgentsRunIsReassignedAndItsLateResultIsNotCounted) {
  SlowRunSweep s("sigstop", 10);
  Harness& h = s.h;
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", s.port);
  const size_t coordinator = StartCoordinator(h, s.matrix, endpoint, s.out);
  const size_t slow = StartAgent(h, "agent-slow", endpoint);
  const std::string victim = WaitForRunningOn(h, s.out, "agent-slow", seconds(30));
  ASSERT_FALSE(victim.empty()) << h.Log("agent-slow");
  const size_t steady = StartAgent(h, "agent-steady", endpoint);
  std::this_thread::sleep_for(milliseconds(300));

  h.process(slow).Signal(SIGSTOP);  // the agent's group; its engine is in a group of its own
  EXPECT_TRUE(Harness::WaitFor(
      [&] {
        return h.QueryInt(s.out, fmt::format("SELECT COUNT(*) FROM attempts WHERE run_id='{}' AND "
                                             "agents='agent-slow' AND outcome='lost'",
                                             victim)) == 1;
      },
      seconds(8)))
      << h.Log("coordinator");
  std::this_thread::sleep_for(milliseconds(1000));
  h.process(slow).Signal(SIGCONT);

  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(90)), 0) << h.Log("coordinator");
  ExpectEveryRunDoneOnce(h, s.out, 10, SlowRunSweep::kRequests);
  // The victim's committed result is the retry's, not the frozen attempt's.
  EXPECT_EQ(
      h.Query(s.out, fmt::format("SELECT agent_id, attempt FROM results WHERE run_id='{}'", victim))
          .rows.at(0)
          .at(0),
      "agent-steady");
  const std::string slow_log = h.Log("agent-slow");
  EXPECT_NE(slow_log.find("stalled for"), std::string::npos) << slow_log;
  // Its late report reached the coordinator and was kept as history of attempt 1.
  EXPECT_EQ(h.QueryInt(s.out, fmt::format("SELECT COUNT(*) FROM attempts WHERE run_id='{}' AND "
                                          "attempt=1 AND error LIKE '%stalled for%'",
                                          victim)),
            1)
      << h.Log("coordinator") << slow_log;
  EXPECT_EQ(ExitCode(h.process(slow), seconds(15)), 0) << slow_log;
  EXPECT_EQ(ExitCode(h.process(steady), seconds(15)), 0) << h.Log("agent-steady");
  EXPECT_EQ(SpooledFiles(h.Path("agent-slow/spool")), 0u);
  EXPECT_EQ(h.QueryInt(s.out, "SELECT COUNT(*) FROM runs WHERE attempts > 1"), 1);
}

// Processes whose command line holds `needle`.
int ProcessesWith(const std::string& needle) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = ReadTextFile((entry.path() / "cmdline").string());
    std::string spaced = cmdline;
    std::replace(spaced.begin(), spaced.end(), '\0', ' ');
    if (spaced.find(needle) != std::string::npos) ++count;
  }
  return count;
}

// Engines that stop mid-stream in a full sweep (the emulator's fault plan): one dies after 10
// requests (SIGKILL), one cuts a fifth of its streams mid-chunk. The dying one is retried with a
// fresh engine up to max_attempts, then failed with the reason; truncated streams are failed
// requests of a run that is still done; the next runs start fresh engines and finish.
TEST(Faults, EngineThatStopsMidStreamIsRetriedThenFailedAndTheSweepGoesOn) {
  Harness h("midstream");
  const std::string mark = std::to_string(100000 + ::getpid() % 800000);  // finds our engines
  const std::string sim =
      R"("{servesweep}", sim, --host, 127.0.0.1, --port, "{port}", --model, "{model}", )"
      R"(--ttft-ms, "2", --itl-ms, "2", --fault-seed, ")" +
      mark + R"(")";
  const std::string matrix = h.WriteFile("m.yaml", fmt::format(R"(name: midstream
engine: template
model: m
timeout_s: 30
max_attempts: 2
local: {{agents: 1, gpus_per_agent: 1}}
workload: {{input_len: 8, output_len: 8, num_requests: 30, concurrency: 2}}
axes:
  engine_config:
    - {{command: [{0}, --fault-crash-after, "10"]}}
    - {{command: [{0}, --fault-truncate-rate, "0.2"]}}
    - {{command: [{0}]}}
)",
                                                               sim));
  const std::string out = h.Path("out");
  const size_t run = h.Start("run", {"run", matrix, "--out", out});
  ASSERT_EQ(ExitCode(h.process(run), seconds(120)), 2) << h.Log("run");  // 2: a run failed

  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs"), 3);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results"), 3);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(DISTINCT run_id) FROM results"), 3);
  const auto crashed = h.Query(out, "SELECT status, attempts, last_error FROM runs WHERE idx=0");
  ASSERT_EQ(crashed.rows.size(), 1u);
  EXPECT_EQ(crashed.rows[0][0], "failed");
  EXPECT_EQ(crashed.rows[0][1], "2");
  EXPECT_NE(crashed.rows[0][2].find("engine died during the run"), std::string::npos)
      << crashed.rows[0][2];
  // Both attempts died mid-run, each with an engine of its own: a reused dead engine would have
  // failed the second attempt before it was ready.
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM attempts a JOIN runs r USING(run_id) WHERE r.idx=0 "
                       "AND a.error LIKE '%engine died during the run%'"),
            2);
  // Truncated streams: failed requests with their error, in a run that is done.
  EXPECT_EQ(h.Query(out, "SELECT status FROM runs WHERE idx=1").rows.at(0).at(0), "done");
  const int64_t cut = h.QueryInt(out,
                                 "SELECT COUNT(*) FROM requests q JOIN runs r USING(run_id) WHERE "
                                 "r.idx=1 AND q.success=0 AND q.error != ''");
  EXPECT_GT(cut, 0);
  EXPECT_LT(cut, 30);
  EXPECT_EQ(
      h.QueryInt(out,
                 "SELECT results.completed FROM results JOIN runs ON runs.run_id = results.run_id "
                 "WHERE runs.idx=1"),
      30 - cut);
  // The healthy run after them started a fresh engine and completed every request.
  EXPECT_EQ(h.Query(out, "SELECT status FROM runs WHERE idx=2").rows.at(0).at(0), "done");
  EXPECT_EQ(
      h.QueryInt(out,
                 "SELECT results.completed FROM results JOIN runs ON runs.run_id = results.run_id "
                 "WHERE runs.idx=2"),
      30);
  EXPECT_EQ(h.QueryInt(out, "SELECT MAX(attempts) FROM runs WHERE idx > 0"), 1);
  EXPECT_EQ(ProcessesWith("--fault-seed " + mark), 0);  // no engine left behind
}

}  // namespace
}  // namespace servesweep::testing
