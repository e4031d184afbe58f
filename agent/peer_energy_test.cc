// The mailbox of a multi-node run's energy reads (agent/peer_energy.h): the wire form keeps every
// field, an answer is timed from the head's asking to its arrival, the head waits for every node
// or the timeout, a resent answer replaces the first, and the worker wakes for an ask.
#include "agent/peer_energy.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "common/clock.h"

namespace servesweep::agent {
namespace {

using std::chrono::milliseconds;

PeerEnergyRead Answer(uint8_t edge, const std::string& node, double mj) {
  PeerEnergyRead read;
  read.edge = edge;
  read.node = node;
  read.gpus = {"0", "GPU-b-1"};
  read.prefill = {true, false};
  read.read.gpus = {{0, "GPU-b-0", mj}, {1, "GPU-b-1", NAN}};
  return read;
}

TEST(PeerEnergy, TheWireFormKeepsEveryField) {
  capnp::MallocMessageBuilder message;
  PeerEnergyRead sent = Answer(1, "node-b", 1234.5);
  sent.read.why_none = "";
  ToWire(sent, message.initRoot<schema::EnergyRead>());
  const PeerEnergyRead got = FromWire(message.getRoot<schema::EnergyRead>().asReader());
  EXPECT_EQ(got.edge, 1);
  EXPECT_EQ(got.node, "node-b");
  EXPECT_EQ(got.gpus, sent.gpus);
  EXPECT_EQ(got.prefill, sent.prefill);
  ASSERT_EQ(got.read.gpus.size(), 2u);
  EXPECT_EQ(got.read.gpus[0].uuid, "GPU-b-0");
  EXPECT_DOUBLE_EQ(got.read.gpus[0].energy_mj, 1234.5);
  EXPECT_TRUE(std::isnan(got.read.gpus[1].energy_mj));
  PeerEnergyRead failed = Answer(0, "node-c", 0);
  failed.read.gpus.clear();
  failed.read.why_none = "nvidia-smi did not start";
  ToWire(failed, message.initRoot<schema::EnergyRead>());
  EXPECT_EQ(FromWire(message.getRoot<schema::EnergyRead>().asReader()).read.why_none,
            "nvidia-smi did not start");
}

TEST(PeerEnergy, TheHeadWaitsForEveryNodeAndTimesEachAnswerFromItsAsking) {
  PeerEnergyMailbox box;
  const int64_t before_ask_ns = SteadyNowNs();
  box.Ask(0);
  EXPECT_EQ(box.TakeAsks(), std::vector<uint8_t>{0});
  EXPECT_TRUE(box.TakeAsks().empty());
  std::thread workers([&] {
    std::this_thread::sleep_for(milliseconds(30));
    box.DeliverAnswer(Answer(0, "b", 1));
    box.DeliverAnswer(Answer(0, "b", 2));  // resent: replaces the first
    box.DeliverAnswer(Answer(0, "c", 3));
  });
  const auto answers = box.AwaitAnswers(0, 2, milliseconds(5000));
  const int64_t after_ns = SteadyNowNs();
  workers.join();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].node, "b");
  EXPECT_DOUBLE_EQ(answers[0].read.gpus[0].energy_mj, 2);
  for (const auto& a : answers) {
    EXPECT_GE(a.read.started_ns, before_ask_ns);
    EXPECT_GE(a.read.finished_ns - a.read.started_ns, 30'000'000);
    EXPECT_LE(a.read.finished_ns, after_ns);
  }
  // One node silent: the timeout returns what came.
  box.Ask(1);
  box.DeliverAnswer(Answer(1, "b", 5));
  const int64_t wait_from_ns = SteadyNowNs();
  const auto partial = box.AwaitAnswers(1, 2, milliseconds(100));
  EXPECT_EQ(partial.size(), 1u);
  EXPECT_GE(SteadyNowNs() - wait_from_ns, 100'000'000);
}

TEST(PeerEnergy, AWorkerWakesForAnAskAndItsAnswerIsSentOnce) {
  PeerEnergyMailbox box;
  EXPECT_FALSE(box.WaitAsk(milliseconds(10)).has_value());
  std::thread loop([&] {
    std::this_thread::sleep_for(milliseconds(20));
    box.DeliverAsk(1);
  });
  const auto edge = box.WaitAsk(milliseconds(5000));
  loop.join();
  ASSERT_TRUE(edge.has_value());
  EXPECT_EQ(*edge, 1);
  box.Answer(Answer(1, "b", 7));
  EXPECT_EQ(box.TakeAnswers().size(), 1u);
  EXPECT_TRUE(box.TakeAnswers().empty());
}

}  // namespace
}  // namespace servesweep::agent
