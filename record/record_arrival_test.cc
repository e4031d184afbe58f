// The record's arrival condition (record/record_builder.h) for each load mode of a matrix, and the
// load settings the same spec gives the load generator.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include "matrix/matrix_loader.h"
#include "record/record_builder.h"
#include "record/run_settings.h"

namespace servesweep::record {
namespace {

const char* kHead = "name: t\nengine: sim\nmodel: m\n";

Status Expand(const std::string& workload, matrix::LoadedMatrix* m) {
  return matrix::ExpandMatrix("m.yaml", std::string(kHead) + "workload: " + workload + "\n", m);
}

std::string ArrivalOf(schema::RunSpec::Reader spec) {
  capnp::MallocMessageBuilder message;
  auto record = message.initRoot<schema::BenchmarkRecord>();
  FillConditions(spec, NodeFacts{}, RunSettingsFor(spec, "").load, record);
  return record.getArrival().cStr();
}

TEST(MatrixLoadModes, ConstantArrivalsAndRampsReachTheLoadGenerator) {
  matrix::LoadedMatrix m;
  ASSERT_TRUE(Expand("{input_len: 8, output_len: 4, num_requests: 100, request_rate: 5, "
                     "arrival: constant}",
                     &m)
                  .ok());
  auto settings = workload::LoadSettingsFor(m.matrix().getRuns()[0], "http://x");
  EXPECT_EQ(settings.arrival, loadgen::ArrivalKind::kConstant);
  EXPECT_EQ(ArrivalOf(m.matrix().getRuns()[0]), "constant");

  matrix::LoadedMatrix ramp;
  Status s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 200, "
      "ramp: {kind: linear, start_rate: 10, end_rate: 30}}",
      &ramp);
  ASSERT_TRUE(s.ok()) << s.message();
  settings = workload::LoadSettingsFor(ramp.matrix().getRuns()[0], "http://x");
  EXPECT_EQ(settings.ramp, loadgen::RampKind::kLinear);
  EXPECT_EQ(settings.ramp_start_rate_per_s, 10);
  EXPECT_EQ(settings.ramp_end_rate_per_s, 30);
  EXPECT_EQ(ArrivalOf(ramp.matrix().getRuns()[0]), "poisson ramp linear 10->30/s over 10 s");
}

TEST(MatrixLoadModes, DurationWarmupAndDrain) {
  matrix::LoadedMatrix m;
  Status s = Expand(
      "{input_len: 8, output_len: 4, concurrency: 4, warmup_s: 5, duration_s: 30, "
      "drain_timeout_s: 2}",
      &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto settings = workload::LoadSettingsFor(m.matrix().getRuns()[0], "http://x");
  EXPECT_EQ(settings.warmup_s, 5);
  EXPECT_EQ(settings.duration_s, 30);
  EXPECT_EQ(settings.drain_timeout_s, 2);
  EXPECT_EQ(ArrivalOf(m.matrix().getRuns()[0]),
            "closed-loop, warm-up 5 s, window 30 s, drain timeout 2 s");

  matrix::LoadedMatrix bad;
  s = Expand("{input_len: 8, output_len: 4, num_requests: 4, concurrency: 4, warmup_s: 5}", &bad);
  EXPECT_EQ(settings.threads, 1u);  // one load thread unless client_threads says more
  EXPECT_NE(s.message().find("expected 'duration_s' with 'warmup_s'"), std::string::npos)
      << s.message();
  s = Expand("{input_len: 8, output_len: 4, concurrency: 4, duration_s: 0}", &bad);
  EXPECT_NE(s.message().find("m.yaml:4:69: expected 'duration_s' > 0 seconds, found 0"),
            std::string::npos)
      << s.message();
}

TEST(MatrixLoadModes, SessionsSetTheRequestCount) {
  matrix::LoadedMatrix m;
  Status s = Expand(
      "{api: chat, input_len: 8, output_len: 4, concurrency: 2, "
      "sessions: {count: 5, turns: 3, think_time_s: 1.5, think_time: exponential}}",
      &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto spec = m.matrix().getRuns()[0];
  EXPECT_EQ(spec.getWorkload().getNumRequests(), 15u);
  const auto settings = workload::LoadSettingsFor(spec, "http://x");
  EXPECT_EQ(settings.sessions, 5u);
  EXPECT_EQ(settings.turns, 3u);
  EXPECT_EQ(settings.think_time_s, 1.5);
  EXPECT_TRUE(settings.think_time_exponential);
  EXPECT_EQ(ArrivalOf(spec), "sessions 5x3 turns, think 1.5 s (exponential)");
  matrix::LoadedMatrix bad;
  s = Expand(
      "{input_len: 8, output_len: 4, concurrency: 2, sessions: {count: 5, turns: 3, "
      "think_tim: 1}}",
      &bad);
  EXPECT_NE(s.message().find("m.yaml:4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("unknown key 'think_tim'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did you mean 'think_time'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace servesweep::record
