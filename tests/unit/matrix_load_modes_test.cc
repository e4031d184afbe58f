// Load-mode keys of the matrix: read into the run spec and into the load generator's settings,
// named in the record's arrival condition, and refused with file:line:column, expected/found and
// did-you-mean when wrong.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/record_builder.h"
#include "coordinator/matrix_loader.h"

namespace servesweep::agent {
namespace {

const char* kHead = "name: t\nengine: sim\nmodel: m\n";

Status Expand(const std::string& workload, coordinator::LoadedMatrix* m,
              const std::string& path = "m.yaml") {
  return coordinator::ExpandMatrix(path, std::string(kHead) + "workload: " + workload + "\n", m);
}

std::string ArrivalOf(schema::RunSpec::Reader spec) {
  capnp::MallocMessageBuilder message;
  auto record = message.initRoot<schema::BenchmarkRecord>();
  FillConditions(spec, NodeFacts{}, record);
  return record.getArrival().cStr();
}

TEST(MatrixLoadModes, ConstantArrivalsAndRampsReachTheLoadGenerator) {
  coordinator::LoadedMatrix m;
  ASSERT_TRUE(Expand("{input_len: 8, output_len: 4, num_requests: 100, request_rate: 5, "
                     "arrival: constant}",
                     &m)
                  .ok());
  auto settings = LoadSettingsFor(m.matrix().getRuns()[0], "http://x");
  EXPECT_EQ(settings.arrival, loadgen::ArrivalKind::kConstant);
  EXPECT_EQ(ArrivalOf(m.matrix().getRuns()[0]), "constant");

  coordinator::LoadedMatrix ramp;
  Status s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 200, "
      "ramp: {kind: linear, start_rate: 10, end_rate: 30}}",
      &ramp);
  ASSERT_TRUE(s.ok()) << s.message();
  settings = LoadSettingsFor(ramp.matrix().getRuns()[0], "http://x");
  EXPECT_EQ(settings.ramp, loadgen::RampKind::kLinear);
  EXPECT_EQ(settings.ramp_start_rate_per_s, 10);
  EXPECT_EQ(settings.ramp_end_rate_per_s, 30);
  EXPECT_EQ(ArrivalOf(ramp.matrix().getRuns()[0]), "poisson ramp linear 10->30/s over 10 s");
}

TEST(MatrixLoadModes, DurationWarmupAndDrain) {
  coordinator::LoadedMatrix m;
  Status s = Expand(
      "{input_len: 8, output_len: 4, concurrency: 4, warmup_s: 5, duration_s: 30, "
      "drain_timeout_s: 2}",
      &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto settings = LoadSettingsFor(m.matrix().getRuns()[0], "http://x");
  EXPECT_EQ(settings.warmup_s, 5);
  EXPECT_EQ(settings.duration_s, 30);
  EXPECT_EQ(settings.drain_timeout_s, 2);
  EXPECT_EQ(ArrivalOf(m.matrix().getRuns()[0]),
            "closed-loop, warm-up 5 s, window 30 s, drain timeout 2 s");

  coordinator::LoadedMatrix bad;
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
  coordinator::LoadedMatrix m;
  Status s = Expand(
      "{api: chat, input_len: 8, output_len: 4, concurrency: 2, "
      "sessions: {count: 5, turns: 3, think_time_s: 1.5, think_time: exponential}}",
      &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto spec = m.matrix().getRuns()[0];
  EXPECT_EQ(spec.getWorkload().getNumRequests(), 15u);
  const auto settings = LoadSettingsFor(spec, "http://x");
  EXPECT_EQ(settings.sessions, 5u);
  EXPECT_EQ(settings.turns, 3u);
  EXPECT_EQ(settings.think_time_s, 1.5);
  EXPECT_TRUE(settings.think_time_exponential);
  EXPECT_EQ(ArrivalOf(spec), "sessions 5x3 turns, think 1.5 s (exponential)");
  coordinator::LoadedMatrix bad;
  s = Expand(
      "{input_len: 8, output_len: 4, concurrency: 2, sessions: {count: 5, turns: 3, "
      "think_tim: 1}}",
      &bad);
  EXPECT_NE(s.message().find("m.yaml:4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("unknown key 'think_tim'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did you mean 'think_time'"), std::string::npos) << s.message();
}

TEST(MatrixLoadModes, ClientThreadsReachTheLoadGenerator) {
  coordinator::LoadedMatrix m;
  Status s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 4, concurrency: 8, "
      "client_threads: 2}",
      &m);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(LoadSettingsFor(m.matrix().getRuns()[0], "http://x").threads, 2u);
  coordinator::LoadedMatrix bad;
  s = Expand("{input_len: 8, output_len: 4, num_requests: 4, client_threads: 0}", &bad);
  EXPECT_NE(s.message().find("m.yaml:4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("expected 'client_threads' to be an integer >= 1, found 0"),
            std::string::npos)
      << s.message();
  s = Expand("{input_len: 8, output_len: 4, num_requests: 4, client_threads: 65}", &bad);
  EXPECT_NE(s.message().find("expected 'client_threads' from 1 to 64, found 65"), std::string::npos)
      << s.message();
}

TEST(MatrixLoadModes, BadKeysNamePlaceAndSuggestion) {
  coordinator::LoadedMatrix bad;
  Status s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, request_rate: 5, "
      "arival: constant}",
      &bad);
  EXPECT_NE(s.message().find("m.yaml:4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did you mean 'arrival'"), std::string::npos) << s.message();
  s = Expand("{input_len: 8, output_len: 4, num_requests: 2, request_rate: 5, arrival: uniform}",
             &bad);
  EXPECT_NE(s.message().find("expected 'arrival' to be poisson or constant"), std::string::npos)
      << s.message();
  s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, "
      "ramp: {kind: linear, start_rate: 1, end_rat: 3}}",
      &bad);
  EXPECT_NE(s.message().find("did you mean 'end_rate'"), std::string::npos) << s.message();
  s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, "
      "ramp: {kind: cubic, start_rate: 1, end_rate: 3}}",
      &bad);
  EXPECT_NE(s.message().find("expected 'ramp.kind' to be linear or exponential, found 'cubic'"),
            std::string::npos)
      << s.message();
}

TEST(MatrixLoadModes, CustomPromptsAreReadWithTheirFileLine) {
  const auto dir = std::filesystem::temp_directory_path() / "servesweep_prompts_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "good.jsonl")
      << "{\"prompt\": \"a b c\", \"max_tokens\": 4}\n"
         "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n";
  std::ofstream(dir / "bad.jsonl")
      << "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"max_tokens\": -1}\n";
  const std::string matrix = (dir / "m.yaml").string();
  coordinator::LoadedMatrix m;
  Status s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, concurrency: 1, "
      "prompts: jsonl:good.jsonl}",
      &m, matrix);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto settings = LoadSettingsFor(m.matrix().getRuns()[0], "http://x");
  ASSERT_EQ(settings.custom_prompts.size(), 2u);
  EXPECT_EQ(settings.custom_prompts[0].prompt, "a b c");
  EXPECT_EQ(settings.custom_prompts[0].max_tokens, 4u);
  EXPECT_EQ(settings.custom_prompts[1].messages_json, R"([{"content":"hi","role":"user"}])");
  coordinator::LoadedMatrix bad;
  s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, concurrency: 1, "
      "prompts: jsonl:bad.jsonl}",
      &bad, matrix);
  EXPECT_NE(s.message().find(matrix + ":4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad.jsonl:2: expected \"max_tokens\" to be a positive integer, "
                             "found -1"),
            std::string::npos)
      << s.message();
  s = Expand("{input_len: 8, output_len: 4, num_requests: 2, concurrency: 1, prompts: bad.jsonl}",
             &bad, matrix);
  EXPECT_NE(s.message().find("expected 'prompts: jsonl:<file>', found 'bad.jsonl'"),
            std::string::npos)
      << s.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace servesweep::agent

namespace servesweep::agent {
namespace {

TEST(MatrixLoadModes, LoadModesExampleExpands) {
  coordinator::LoadedMatrix m;
  Status s = coordinator::LoadMatrixFile(SERVESWEEP_SOURCE_DIR "/examples/load-modes.yaml", &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].getWorkload().getDurationS(), 20);
  EXPECT_EQ(runs[1].getWorkload().getRamp(), "linear");
  EXPECT_EQ(runs[2].getWorkload().getNumRequests(), 64u);
  EXPECT_EQ(runs[3].getWorkload().getCustomPrompts().size(), 3u);
}

}  // namespace
}  // namespace servesweep::agent
