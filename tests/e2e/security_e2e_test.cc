// End-to-end: CurveZMQ between separate coordinator and agent processes. Only agents whose
// public keys the coordinator lists are admitted (ZAP); an unlisted agent, or one that trusts the
// wrong coordinator key, never registers and nothing it sends is recorded. Plain TCP only with
// --insecure, and then with a warning. `servesweep keygen` writes keys a stranger cannot read.
#include <capnp/message.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <zmq.hpp>

#include "tests/support/harness.h"
#include "transport/curve_keys.h"
#include "transport/envelope_codec.h"

namespace servesweep::testing {
namespace {

using std::chrono::seconds;

const std::vector<std::string> kFast = {"--heartbeat-ms", "100", "--liveness", "3"};

size_t StartAgent(Harness& h, const std::string& id, const std::string& endpoint,
                  const std::vector<std::string>& security) {
  return h.Start(id, Concat(Concat({"agent", "--connect", endpoint, "--id", id, "--emulate-gpus",
                                    "1", "--spool", h.Path(id + "/spool"), "--work-dir",
                                    h.Path(id + "/work"), "--reconnect-max-ms", "500"},
                                   kFast),
                            security));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(Security, OnlyListedAgentsAreAdmitted) {
  Harness h("curve");
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  const std::string matrix = h.WriteFile("m.yaml", SimMatrix("curve", 3, 8, 2, 8, 5, 2));
  // The allow-list holds the "agent" key and the "misled" key; "stranger" is on no list, and
  // "misled" trusts an impostor's key instead of the coordinator's.
  const std::string allowed =
      h.WriteFile("allowed.keys", "# agents of this sweep\n" + ReadAll(h.KeyPath("agent", "pub")) +
                                      ReadAll(h.KeyPath("misled", "pub")) + "\n");
  const size_t coordinator = h.Start(
      "coordinator",
      Concat(Concat({"coordinator", matrix, "--bind", endpoint, "--out", out, "--secret-key",
                     h.KeyPath("coordinator", "secret"), "--allowed-keys", allowed},
                    kFast),
             {}));
  const size_t stranger = StartAgent(h, "stranger", endpoint, h.AgentKeyArgs("stranger"));
  const size_t misled = StartAgent(h, "misled", endpoint, h.AgentKeyArgs("misled", "impostor"));
  // The stranger's handshake reaches the ZAP handler and is refused.
  ASSERT_TRUE(Harness::WaitFor(
      [&] { return h.Log("coordinator").find("not on the allow-list") != std::string::npos; },
      seconds(10)))
      << h.Log("coordinator");
  std::this_thread::sleep_for(seconds(1));  // time enough to say hello many times over
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM agents"), 0);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM attempts"), 0);

  // A listed agent completes the sweep alone.
  const size_t listed = StartAgent(h, "listed", endpoint, h.AgentKeyArgs("agent"));
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 0) << h.Log("coordinator");
  EXPECT_EQ(ExitCode(h.process(listed), seconds(10)), 0) << h.Log("listed");
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 3);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results WHERE agent_id != 'listed'"), 0);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM attempts WHERE agents != 'listed'"), 0);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM agents WHERE agent_id != 'listed'"), 0);
  // Neither outsider ever heard the coordinator: no bye, so both are still waiting.
  EXPECT_FALSE(h.process(stranger).Poll().has_value());
  EXPECT_FALSE(h.process(misled).Poll().has_value());
  EXPECT_EQ(h.Log("stranger").find("said bye"), std::string::npos);
  EXPECT_EQ(h.Log("misled").find("said bye"), std::string::npos);
  EXPECT_NE(h.Log("coordinator").find("CurveZMQ"), std::string::npos);
  EXPECT_EQ(h.Log("coordinator").find("plain TCP"), std::string::npos);
}

// Two listed keys, one agent id: the id belongs to the key it was first seen with. A second
// peer presenting that id with the other listed key is refused: its hello does not register
// it, and a result it forges for the real agent's run is not recorded.
TEST(Security, AnAgentIdStaysWithTheKeyItWasFirstSeenWith) {
  Harness h("idkey");
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  // Runs of ~1.5 s, so the forged result lands while the real attempt is running.
  const std::string matrix = h.WriteFile("m.yaml", SimMatrix("idkey", 3, 40, 1, 8, 10, 4));
  const std::string allowed = h.WriteFile(
      "allowed.keys", ReadAll(h.KeyPath("agent", "pub")) + ReadAll(h.KeyPath("other", "pub")));
  const size_t coordinator =
      h.Start("coordinator",
              Concat({"coordinator", matrix, "--bind", endpoint, "--out", out, "--secret-key",
                      h.KeyPath("coordinator", "secret"), "--allowed-keys", allowed},
                     kFast));
  const size_t real = StartAgent(h, "node1", endpoint, h.AgentKeyArgs("agent"));
  std::string agent_public;
  ASSERT_TRUE(ReadCurvePublicKey(h.KeyPath("agent", "pub"), &agent_public).ok());
  std::string run_id;
  ASSERT_TRUE(Harness::WaitFor(
      [&] {
        const auto rows =
            h.Query(out, "SELECT run_id FROM attempts WHERE outcome='running' AND agents='node1'");
        if (!rows.rows.empty()) run_id = rows.rows[0][0];
        return !run_id.empty();
      },
      seconds(20)))
      << h.Log("coordinator");
  EXPECT_NE(h.Log("coordinator").find("agent id 'node1' bound to public key " + agent_public),
            std::string::npos)
      << h.Log("coordinator");

  {
    std::string server_public;
    CurveKeypair other;
    ASSERT_TRUE(ReadCurvePublicKey(h.KeyPath("coordinator", "pub"), &server_public).ok());
    ASSERT_TRUE(ReadCurveSecretKey(h.KeyPath("other", "secret"), &other).ok());
    zmq::context_t context(1);
    zmq::socket_t impostor(context, zmq::socket_type::dealer);
    impostor.set(zmq::sockopt::routing_id, "node1");
    impostor.set(zmq::sockopt::linger, 2000);
    impostor.set(zmq::sockopt::curve_serverkey, server_public);
    impostor.set(zmq::sockopt::curve_publickey, other.public_z85);
    impostor.set(zmq::sockopt::curve_secretkey, other.secret_z85);
    impostor.connect(endpoint);
    auto send = [&](capnp::MallocMessageBuilder& message) {
      impostor.send(EncodeFrame(message), zmq::send_flags::none);
    };
    capnp::MallocMessageBuilder hello;
    auto inventory = NewEnvelope(hello).initHello().initInventory();
    inventory.setAgentId("node1");
    inventory.setHostname("impostor-host");
    send(hello);
    capnp::MallocMessageBuilder forged;
    auto result = NewEnvelope(forged).initResult();
    result.setRunId(run_id);
    result.setAttempt(1);
    result.setAgentId("node1");
    result.setStatus(schema::RunStatus::FAILED);
    result.setError("IMPOSTOR-FORGED");
    send(forged);
    impostor.close();  // linger sends both first
  }
  ASSERT_TRUE(Harness::WaitFor(
      [&] {
        return h.Log("coordinator").find("refused messages under agent id 'node1'") !=
               std::string::npos;
      },
      seconds(10)))
      << h.Log("coordinator");

  // The real agent keeps its id and finishes the sweep; nothing of the impostor's is recorded.
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 0) << h.Log("coordinator");
  EXPECT_EQ(ExitCode(h.process(real), seconds(10)), 0) << h.Log("node1");
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 3);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results"), 3);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM attempts WHERE error LIKE '%IMPOSTOR%'"), 0);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM agents WHERE hostname='impostor-host'"), 0);
  EXPECT_EQ(
      h.Query(out, "SELECT public_key FROM agent_keys WHERE agent_id='node1'").rows.at(0).at(0),
      agent_public);
}

// `servesweep run` and Slurm jobs make new keys at each start: after --resume with a new
// allow-list, an id bound to a key that is no longer admitted binds anew (else the resumed sweep
// would refuse its own agents and never finish).
TEST(Security, ResumeWithNewKeysBindsTheAgentIdsAnew) {
  Harness h("rebind");
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  const std::string matrix = h.WriteFile("m.yaml", SimMatrix("rebind", 4, 40, 1, 8, 10, 4));
  auto coordinator_args = [&](const std::string& agent_key) {
    return Concat(
        Concat({"coordinator", matrix, "--bind", endpoint, "--out", out, "--secret-key",
                h.KeyPath("coordinator", "secret"), "--allowed-keys", h.KeyPath(agent_key, "pub")},
               kFast),
        {"--resume"});
  };
  size_t coordinator = h.Start("coordinator-1", coordinator_args("agent"));
  size_t agent = StartAgent(h, "node1", endpoint, h.AgentKeyArgs("agent"));
  ASSERT_TRUE(Harness::WaitFor([&] { return h.QueryInt(out, "SELECT COUNT(*) FROM results") >= 1; },
                               seconds(30)))
      << h.Log("coordinator-1");
  h.process(coordinator).Signal(SIGKILL);
  h.process(agent).Signal(SIGKILL);
  h.process(coordinator).Wait(seconds(5));
  h.process(agent).Wait(seconds(5));
  ASSERT_LT(h.QueryInt(out, "SELECT COUNT(*) FROM results"), 4);

  // New keys for the agent: the old one is off the allow-list.
  coordinator = h.Start("coordinator-2", coordinator_args("rotated"));
  // The same node (id, spool) restarted with its new key.
  agent = h.Start("node1-again",
                  Concat(Concat({"agent", "--connect", endpoint, "--id", "node1", "--emulate-gpus",
                                 "1", "--spool", h.Path("node1/spool"), "--work-dir",
                                 h.Path("node1/work"), "--reconnect-max-ms", "500"},
                                kFast),
                         h.AgentKeyArgs("rotated")));
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 0) << h.Log("coordinator-2");
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 4);
  EXPECT_NE(h.Log("coordinator-2").find("agent id 'node1' was bound to key"), std::string::npos)
      << h.Log("coordinator-2");
  EXPECT_EQ(h.Log("coordinator-2").find("refused messages under agent id"), std::string::npos);
  std::string rotated_public;
  ASSERT_TRUE(ReadCurvePublicKey(h.KeyPath("rotated", "pub"), &rotated_public).ok());
  EXPECT_EQ(
      h.Query(out, "SELECT public_key FROM agent_keys WHERE agent_id='node1'").rows.at(0).at(0),
      rotated_public);
}

TEST(Security, PlainTcpOnlyWhenAskedAndThenWithAWarning) {
  Harness h("insecure");
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  const std::string matrix = h.WriteFile("m.yaml", SimMatrix("insecure", 2, 6, 2, 8, 5, 2));
  // Neither keys nor --insecure: refused before the output folder is touched.
  const size_t refused =
      h.Start("refused", Concat({"coordinator", matrix, "--bind", endpoint, "--out", out}, kFast));
  EXPECT_EQ(ExitCode(h.process(refused), seconds(10)), 1);
  EXPECT_NE(h.Log("refused").find("--insecure"), std::string::npos) << h.Log("refused");
  EXPECT_FALSE(std::filesystem::exists(out));
  const size_t refused_agent = StartAgent(h, "refused-agent", endpoint, {});
  EXPECT_EQ(ExitCode(h.process(refused_agent), seconds(10)), 1);
  EXPECT_NE(h.Log("refused-agent").find("--insecure"), std::string::npos);

  const size_t coordinator = h.Start(
      "coordinator",
      Concat({"coordinator", matrix, "--bind", endpoint, "--out", out, "--insecure"}, kFast));
  const size_t agent = StartAgent(h, "plain", endpoint, {"--insecure"});
  ASSERT_EQ(ExitCode(h.process(coordinator), seconds(60)), 0) << h.Log("coordinator");
  EXPECT_EQ(ExitCode(h.process(agent), seconds(10)), 0);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 2);
  EXPECT_NE(h.Log("coordinator").find("warning coordinator listening on"), std::string::npos)
      << h.Log("coordinator");
  EXPECT_NE(h.Log("coordinator").find("plain TCP (--insecure)"), std::string::npos);
  EXPECT_NE(h.Log("plain").find("plain TCP (--insecure)"), std::string::npos) << h.Log("plain");
}

TEST(Security, RunCommandIsSecureWithoutUserSteps) {
  Harness h("runkeys");
  const std::string matrix = h.WriteFile("m.yaml", SimMatrix("runkeys", 2, 6, 2, 8, 5, 2));
  const std::string out = h.Path("out");
  const size_t run = h.Start("run", {"run", matrix, "--out", out, "--agents", "2"});
  ASSERT_EQ(ExitCode(h.process(run), seconds(60)), 0) << h.Log("run");
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status='done'"), 2);
  EXPECT_NE(h.Log("run").find("(CurveZMQ; 1 agent key(s) admitted)"), std::string::npos)
      << h.Log("run");
  EXPECT_EQ(h.Log("run").find("plain TCP"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out + "/.keys"));  // the run's keys do not outlive it
}

TEST(Security, KeygenWritesAPrivateSecretAndNeverOverwrites) {
  Harness h("keygen");
  const std::string dir = h.Path("k");
  const size_t first = h.Start("first", {"keygen", "--out", dir, "--name", "node1"});
  ASSERT_EQ(ExitCode(h.process(first), seconds(10)), 0) << h.Log("first");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/node1.secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string public_z85;
  ASSERT_TRUE(ReadCurvePublicKey(dir + "/node1.pub", &public_z85).ok());
  CurveKeypair keypair;
  ASSERT_TRUE(ReadCurveSecretKey(dir + "/node1.secret", &keypair).ok());
  EXPECT_EQ(keypair.public_z85, public_z85);  // the pair belongs together
  const std::string secret_before = ReadAll(dir + "/node1.secret");
  const size_t again = h.Start("again", {"keygen", "--out", dir, "--name", "node1"});
  EXPECT_EQ(ExitCode(h.process(again), seconds(10)), 1);
  EXPECT_EQ(ReadAll(dir + "/node1.secret"), secret_before);
  // A secret others may read is refused where it is used.
  ::chmod((dir + "/node1.secret").c_str(), 0644);
  EXPECT_FALSE(ReadCurveSecretKey(dir + "/node1.secret", &keypair).ok());
  // An allow-list line that is not a key is reported with its line number.
  const std::string list = h.WriteFile("list", public_z85 + "\nnot-a-key\n");
  std::vector<std::string> keys;
  Status s = ReadCurveAllowList(list, &keys);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(list + ":2:"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace servesweep::testing
