// Schema round trips through the wire framing, and rejection of malformed frames.
#include "transport/envelope_codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

namespace servesweep {
namespace {

std::unique_ptr<DecodedEnvelope> RoundTrip(capnp::MallocMessageBuilder& message) {
  zmq::message_t frame = EncodeFrame(message);
  std::unique_ptr<DecodedEnvelope> decoded;
  Status status = DecodeFrame(frame, &decoded);
  EXPECT_TRUE(status.ok()) << status.message();
  return decoded;
}

TEST(EnvelopeCodec, HelloWithInventoryRoundTrips) {
  capnp::MallocMessageBuilder message;
  auto hello = NewEnvelope(message).initHello();
  auto inventory = hello.initInventory();
  inventory.setAgentId("node-7");
  inventory.setHostname("gpu-node-7");
  inventory.setCpuCores(96);
  auto gpus = inventory.initGpus(2);
  gpus[1].setIndex(1);
  gpus[1].setName("NVIDIA H200");
  gpus[1].setMemoryBytes(141ull << 30);
  auto spooled = hello.initSpooledRunIds(1);
  spooled.set(0, "sweep-0003-abcd");
  hello.setBusyRunId("sweep-0001-ffff");
  hello.setBusyAttempt(2);
  hello.setBusyRole(schema::Role::HEAD);

  auto decoded = RoundTrip(message);
  auto envelope = decoded->envelope();
  ASSERT_EQ(envelope.which(), schema::Envelope::HELLO);
  EXPECT_EQ(envelope.getProtocolVersion(), schema::PROTOCOL_VERSION);
  EXPECT_GT(envelope.getSentAtUnixMs(), 0);
  auto got = envelope.getHello();
  EXPECT_EQ(got.getInventory().getAgentId(), "node-7");
  EXPECT_EQ(got.getInventory().getCpuCores(), 96u);
  ASSERT_EQ(got.getInventory().getGpus().size(), 2u);
  EXPECT_EQ(got.getInventory().getGpus()[1].getName(), "NVIDIA H200");
  EXPECT_EQ(got.getInventory().getGpus()[1].getMemoryBytes(), 141ull << 30);
  EXPECT_EQ(got.getSpooledRunIds()[0], "sweep-0003-abcd");
  EXPECT_EQ(got.getBusyRunId(), "sweep-0001-ffff");
  EXPECT_EQ(got.getBusyAttempt(), 2u);
}

// Every message kind decodes, the newest included (the decoder refuses kinds beyond the last).
TEST(EnvelopeCodec, TheNewestMessageKindsRoundTrip) {
  capnp::MallocMessageBuilder mark_message;
  auto mark = NewEnvelope(mark_message).initEnergyMark();
  mark.setRunId("s-0001-abcd");
  mark.setAttempt(2);
  mark.setEdge(1);
  auto decoded_mark = RoundTrip(mark_message);
  ASSERT_TRUE(decoded_mark);
  ASSERT_EQ(decoded_mark->envelope().which(), schema::Envelope::ENERGY_MARK);
  EXPECT_EQ(decoded_mark->envelope().getEnergyMark().getEdge(), 1u);
  capnp::MallocMessageBuilder read_message;
  auto read = NewEnvelope(read_message).initEnergyRead();
  read.setAgentId("node-b");
  read.initCounters(1)[0].setEnergyMj(1234.5);
  auto decoded_read = RoundTrip(read_message);
  ASSERT_TRUE(decoded_read);
  ASSERT_EQ(decoded_read->envelope().which(), schema::Envelope::ENERGY_READ);
  EXPECT_DOUBLE_EQ(decoded_read->envelope().getEnergyRead().getCounters()[0].getEnergyMj(), 1234.5);
}

TEST(EnvelopeCodec, AssignAndResultRoundTrip) {
  capnp::MallocMessageBuilder message;
  auto assign = NewEnvelope(message).initAssign();
  auto spec = assign.initSpec();
  spec.setRunId("s-0000-1234");
  spec.getLayout().setTp(8);
  spec.getLayout().setExpertParallel(true);
  spec.getWorkload().setConcurrency(64);
  spec.getWorkload().setRequestRatePerS(12.5);
  assign.setRole(schema::Role::WORKER);
  assign.setRank(1);
  assign.setGroupSize(2);
  auto decoded = RoundTrip(message);
  auto got = decoded->envelope().getAssign();
  EXPECT_EQ(got.getSpec().getRunId(), "s-0000-1234");
  EXPECT_EQ(got.getSpec().getLayout().getTp(), 8u);
  EXPECT_EQ(got.getSpec().getLayout().getPp(), 1u);  // schema default
  EXPECT_TRUE(got.getSpec().getLayout().getExpertParallel());
  EXPECT_EQ(got.getSpec().getWorkload().getRequestRatePerS(), 12.5);
  EXPECT_EQ(got.getRole(), schema::Role::WORKER);

  capnp::MallocMessageBuilder result_message;
  auto result = NewEnvelope(result_message).initResult();
  result.setRunId("s-0000-1234");
  result.setStatus(schema::RunStatus::OK);
  result.initRecord().initTtftMs().setP99(42.5);
  auto requests = result.initRequests(3);
  auto times = requests[2].initChunkTimesNs(2);
  times.set(0, 100);
  times.set(1, 250);
  auto decoded_result = RoundTrip(result_message);
  auto got_result = decoded_result->envelope().getResult();
  EXPECT_EQ(got_result.getRecord().getTtftMs().getP99(), 42.5);
  EXPECT_EQ(got_result.getRequests()[2].getChunkTimesNs()[1], 250);
}

TEST(EnvelopeCodec, RejectsMalformedFrames) {
  std::unique_ptr<DecodedEnvelope> decoded;
  zmq::message_t empty;
  EXPECT_FALSE(DecodeFrame(empty, &decoded).ok());
  zmq::message_t odd("1234567", 7);
  EXPECT_NE(DecodeFrame(odd, &decoded).message().find("multiple of 8"), std::string::npos);
  std::string junk(64, '\xff');
  zmq::message_t garbage(junk.data(), junk.size());
  EXPECT_NE(DecodeFrame(garbage, &decoded).message().find("malformed"), std::string::npos);
  zmq::message_t big(std::string(4096, '\0').data(), 4096);
  EXPECT_NE(DecodeFrame(big, &decoded, 1024).message().find("at most 1024"), std::string::npos);

  capnp::MallocMessageBuilder message;
  auto envelope = message.initRoot<schema::Envelope>();
  envelope.setProtocolVersion(schema::PROTOCOL_VERSION + 1);
  envelope.initHeartbeat();
  zmq::message_t frame = EncodeFrame(message);
  EXPECT_FALSE(DecodeFrame(frame, &decoded).ok());
  EXPECT_EQ(decoded, nullptr);
}

}  // namespace
}  // namespace servesweep
