// A permanent error is refused once, never retried as if it were transient: a run whose load
// settings are invalid (here sessions with token-id prompts, which `plan` refuses with the
// matrix's file:line:column) ends `refused` after one attempt with its reason, and the sweep goes
// on. Both sides over real ZeroMQ with CurveZMQ: a real agent given such a spec by a scripted
// coordinator refuses it without starting an engine, and a real coordinator given such a refusal
// by a scripted agent records it once and finishes the sweep with a real agent.
#include <capnp/message.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <zmq.hpp>

#include "matrix/matrix_loader.h"
#include "tests/support/harness.h"
#include "transport/curve_keys.h"
#include "transport/envelope_codec.h"

namespace servesweep::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const std::vector<std::string> kFastHeartbeat = {"--heartbeat-ms", "100", "--liveness", "5"};

// Receives one envelope within `timeout` (nullptr on timeout), sending `idle` meanwhile every
// 100 ms (heartbeats keep the peer from declaring us gone).
std::unique_ptr<DecodedEnvelope> Receive(zmq::socket_t& socket, milliseconds timeout,
                                         const std::function<void()>& idle, bool router) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, milliseconds(100));
    if (!(item.revents & ZMQ_POLLIN)) {
      idle();
      continue;
    }
    zmq::message_t frame;
    if (router) (void)socket.recv(frame);  // the peer's routing id
    (void)socket.recv(frame);
    std::unique_ptr<DecodedEnvelope> decoded;
    if (DecodeFrame(frame, &decoded).ok()) return decoded;
  }
  return nullptr;
}

TEST(Refused, AnAgentRefusesInvalidLoadSettingsWithoutStartingAnEngine) {
  Harness h("refused-agent");
  // A run spec as `plan` would never let through: expanded from a valid matrix, then broken.
  matrix::LoadedMatrix m;
  ASSERT_TRUE(matrix::ExpandMatrix("m.yaml", R"(name: refused
engine: sim
model: test-model
sim: {ttft_ms: 1, itl_ms: 1}
workload: {input_len: 8, output_len: 4, concurrency: 2, sessions: {count: 2, turns: 2}}
)",
                                   &m)
                  .ok());
  capnp::MallocMessageBuilder broken;
  broken.setRoot(m.matrix().getRuns()[0]);
  broken.getRoot<schema::RunSpec>().getWorkload().setTokenIdPrompts(true);

  CurveKeypair server;
  ASSERT_TRUE(ReadCurveSecretKey(h.KeyPath("coordinator", "secret"), &server).ok());
  std::string agent_public;
  ASSERT_TRUE(ReadCurvePublicKey(h.KeyPath("agent", "pub"), &agent_public).ok());
  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::curve_server, 1);
  router.set(zmq::sockopt::curve_secretkey, server.secret_z85);
  router.bind("tcp://127.0.0.1:0");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  const size_t agent =
      h.Start("agent", Concat({"agent", "--connect", endpoint, "--id", "a", "--emulate-gpus", "1",
                               "--spool", h.Path("spool"), "--work-dir", h.Path("work")},
                              Concat(kFastHeartbeat, h.AgentKeyArgs())));
  auto nothing = [] {};
  auto hello = Receive(router, seconds(20), nothing, true);
  ASSERT_TRUE(hello && hello->envelope().isHello()) << h.Log("agent");

  capnp::MallocMessageBuilder message;
  auto assign = NewEnvelope(message).initAssign();
  assign.setSpec(broken.getRoot<schema::RunSpec>());
  assign.setAttempt(1);
  assign.setRole(schema::Role::HEAD);
  assign.setGroupSize(1);
  assign.initAgentIds(1).set(0, "a");
  assign.initPeerAddresses(1).set(0, "127.0.0.1");
  router.send(zmq::buffer(std::string("a")), zmq::send_flags::sndmore);
  router.send(EncodeFrame(message), zmq::send_flags::none);

  std::unique_ptr<DecodedEnvelope> reply;
  for (int i = 0; i < 100 && !(reply && reply->envelope().isResult()); ++i) {
    reply = Receive(router, seconds(20), nothing, true);
    ASSERT_TRUE(reply) << h.Log("agent");
  }
  ASSERT_TRUE(reply->envelope().isResult());
  const auto result = reply->envelope().getResult();
  EXPECT_EQ(result.getStatus(), schema::RunStatus::REFUSED);
  EXPECT_NE(std::string(result.getError()).find("expected 'sessions' closed loop"),
            std::string::npos)
      << result.getError().cStr();
  EXPECT_NE(std::string(result.getError()).find("found 'prompt: token_ids'"), std::string::npos);
  EXPECT_EQ(result.getRequests().size(), 0u);
  // No engine was started for it: no engine log in the agent's work folder.
  EXPECT_FALSE(std::filesystem::exists(
      h.Path(fmt::format("work/{}.1.engine.log", result.getRunId().cStr()))));
  h.process(agent).Stop(seconds(5));
}

TEST(Refused, ACoordinatorRecordsARefusalOnceAndTheSweepGoesOn) {
  Harness h("refused-coordinator");
  const std::string matrix = h.WriteFile("m.yaml", SimMatrix("refusal", 2, 4, 1, 4, 1, 1));
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  const std::string out = h.Path("out");
  const size_t coordinator = h.Start(
      "coordinator",
      Concat(Concat({"coordinator", matrix, "--bind", endpoint, "--out", out}, kFastHeartbeat),
             h.CoordinatorKeyArgs()));

  // A scripted agent that refuses the first run it is given, as a real one refuses invalid
  // settings (the test above), then leaves.
  std::string server_public;
  CurveKeypair keys;
  ASSERT_TRUE(ReadCurvePublicKey(h.KeyPath("coordinator", "pub"), &server_public).ok());
  ASSERT_TRUE(ReadCurveSecretKey(h.KeyPath("agent", "secret"), &keys).ok());
  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::routing_id, "scripted");
  dealer.set(zmq::sockopt::linger, 2000);
  dealer.set(zmq::sockopt::curve_serverkey, server_public);
  dealer.set(zmq::sockopt::curve_publickey, keys.public_z85);
  dealer.set(zmq::sockopt::curve_secretkey, keys.secret_z85);
  dealer.connect(endpoint);
  auto send = [&](const std::function<void(schema::Envelope::Builder)>& fill) {
    capnp::MallocMessageBuilder message;
    fill(NewEnvelope(message));
    dealer.send(EncodeFrame(message), zmq::send_flags::none);
  };
  send([](schema::Envelope::Builder e) {
    auto inventory = e.initHello().initInventory();
    inventory.setAgentId("scripted");
    inventory.setHostname("scripted");
    inventory.setAddress("127.0.0.1");
    inventory.setEmulatedGpus(true);
    auto gpu = inventory.initGpus(1)[0];
    gpu.setName("emulated");
    inventory.initEngines(1).set(0, "sim");
  });
  auto heartbeat = [&] { send([](schema::Envelope::Builder e) { e.initHeartbeat(); }); };
  std::unique_ptr<DecodedEnvelope> assigned;
  while (!(assigned && assigned->envelope().isAssign())) {
    assigned = Receive(dealer, seconds(20), heartbeat, false);
    ASSERT_TRUE(assigned) << h.Log("coordinator");
  }
  const auto assign = assigned->envelope().getAssign();
  const std::string refused_run = assign.getSpec().getRunId();
  send([&](schema::Envelope::Builder e) {
    auto result = e.initResult();
    result.setRunId(refused_run);
    result.setAttempt(assign.getAttempt());
    result.setAgentId("scripted");
    result.setSpec(assign.getSpec());
    result.initAgentIds(1).set(0, "scripted");
    result.setStatus(schema::RunStatus::REFUSED);
    result.setError("the run's load settings: expected 'sessions' closed loop (scripted)");
  });
  std::unique_ptr<DecodedEnvelope> ack;
  while (!(ack && ack->envelope().isAck())) {
    ack = Receive(dealer, seconds(20), heartbeat, false);
    ASSERT_TRUE(ack) << h.Log("coordinator");
  }
  send([](schema::Envelope::Builder e) { e.initBye().setReason("scripted agent done"); });
  dealer.close();

  // A real agent finishes the sweep; the refused run is never given to it.
  h.Start("agent",
          Concat({"agent", "--connect", endpoint, "--id", "real", "--emulate-gpus", "1", "--spool",
                  h.Path("spool"), "--work-dir", h.Path("work"), "--reconnect-max-ms", "500"},
                 Concat(kFastHeartbeat, h.AgentKeyArgs())));
  // 2: the sweep ended with a run that did not succeed (the refused one).
  EXPECT_EQ(ExitCode(h.process(coordinator), seconds(60)), 2) << h.Log("coordinator");
  const auto runs =
      h.Query(out, "SELECT run_id, status, attempts, last_error FROM runs ORDER BY idx");
  ASSERT_EQ(runs.rows.size(), 2u);
  for (const auto& run : runs.rows) {
    if (run[0] == refused_run) {
      EXPECT_EQ(run[1], "failed");
      EXPECT_EQ(run[2], "1");  // max_attempts is 3: a transient failure would have been retried
      EXPECT_NE(run[3].find("expected 'sessions' closed loop"), std::string::npos) << run[3];
    } else {
      EXPECT_EQ(run[1], "done");
    }
  }
  EXPECT_EQ(
      h.Query(out, fmt::format("SELECT outcome FROM attempts WHERE run_id='{}'", refused_run)).rows,
      std::vector<std::vector<std::string>>({{"refused"}}));
  EXPECT_EQ(
      h.Query(out, fmt::format("SELECT result_status FROM results WHERE run_id='{}'", refused_run))
          .rows,
      std::vector<std::vector<std::string>>({{"refused"}}));
}

}  // namespace
}  // namespace servesweep::testing
