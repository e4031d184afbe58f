// The benchmark record's conditions: never blank, and the arrival process named exactly.
#include "record/record_builder.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <cmath>
#include <variant>

#include "matrix/matrix_loader.h"
#include "record/run_settings.h"
#include "results/record_columns.h"

namespace servesweep::record {
namespace {

std::string Arrival(const std::string& workload) {
  matrix::LoadedMatrix m;
  Status s = matrix::ExpandMatrix(
      "m.yaml", "name: t\nengine: sim\nmodel: m\nworkload: " + workload + "\n", &m);
  EXPECT_TRUE(s.ok()) << s.message();
  capnp::MallocMessageBuilder message;
  auto record = message.initRoot<schema::BenchmarkRecord>();
  NodeFacts node;
  node.gpu_model = "NVIDIA H200";
  node.interconnect = "nvlink";
  node.engine_version = "0.10.1";
  FillConditions(m.matrix().getRuns()[0], node, RunSettingsFor(m.matrix().getRuns()[0], "").load,
                 record);
  EXPECT_EQ(record.getEngineCommit(), "n/a: not reported");
  EXPECT_EQ(record.getImage(), "n/a: none, the engine ran from the host's install");
  EXPECT_EQ(record.getKvCacheDtype(), "n/a: engine default");
  EXPECT_EQ(record.getGpuModel(), "NVIDIA H200");
  return record.getArrival().cStr();
}

TEST(RecordBuilder, KeepsTheContainerImageAsProvenance) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setImage("vllm/vllm-openai:v0.33.0");
  capnp::MallocMessageBuilder out;
  auto record = out.initRoot<schema::BenchmarkRecord>();
  FillConditions(spec.asReader(), NodeFacts{}, RunSettingsFor(spec.asReader(), "").load, record);
  EXPECT_EQ(record.getImage(), "vllm/vllm-openai:v0.33.0");
}

TEST(RecordBuilder, NamesTheArrivalProcess) {
  EXPECT_EQ(Arrival("{input_len: 8, output_len: 4, num_requests: 2, concurrency: 4}"),
            "closed-loop");
  EXPECT_EQ(Arrival("{input_len: 8, output_len: 4, num_requests: 2, request_rate: 5}"), "poisson");
  EXPECT_EQ(
      Arrival("{input_len: 8, output_len: 4, num_requests: 2, request_rate: 5, burstiness: 0.5}"),
      "gamma(burstiness=0.5)");
}

TEST(RecordBuilder, LoadSettingsCarryTheWorkload) {
  matrix::LoadedMatrix m;
  ASSERT_TRUE(matrix::ExpandMatrix("m.yaml",
                                   "name: t\nengine: sim\nmodel: m\nworkload: "
                                   "{input_len: 8, output_len: 4, num_requests: 2, "
                                   "request_rate: 5, burstiness: 0.25, max_in_flight: 3}\n",
                                   &m)
                  .ok());
  const auto settings = workload::LoadSettingsFor(m.matrix().getRuns()[0], "http://x");
  EXPECT_EQ(settings.burstiness, 0.25);
  EXPECT_EQ(settings.request_rate_per_s, 5);
  EXPECT_EQ(settings.max_in_flight, 3u);
  EXPECT_EQ(settings.concurrency, 0u);
  EXPECT_TRUE(settings.plan.empty());
  EXPECT_FALSE(settings.token_id_prompts);
  matrix::LoadedMatrix ids;
  ASSERT_TRUE(matrix::ExpandMatrix("m.yaml",
                                   "name: t\nengine: sim\nmodel: m\nworkload: "
                                   "{input_len: 8, output_len: 4, num_requests: 2, "
                                   "concurrency: 1, prompt: token_ids}\n",
                                   &ids)
                  .ok());
  EXPECT_TRUE(workload::LoadSettingsFor(ids.matrix().getRuns()[0], "http://x").token_id_prompts);
  matrix::LoadedMatrix chat_ids;
  Status chat = matrix::ExpandMatrix("m.yaml",
                                     "name: t\nengine: sim\nmodel: m\nworkload: "
                                     "{input_len: 8, output_len: 4, num_requests: 2, "
                                     "concurrency: 1, prompt: token_ids, api: chat}\n",
                                     &chat_ids);
  EXPECT_NE(chat.message().find("expected 'prompt: token_ids' with 'api: completions'"),
            std::string::npos)
      << chat.message();
  matrix::LoadedMatrix bad;
  Status s = matrix::ExpandMatrix("m.yaml",
                                  "name: t\nengine: sim\nmodel: m\nworkload: "
                                  "{input_len: 8, output_len: 4, num_requests: 2, "
                                  "request_rate: 5, burstiness: 0}\n",
                                  &bad);
  EXPECT_NE(s.message().find("expected 'burstiness' > 0 (1 = Poisson), found 0"), std::string::npos)
      << s.message();
}

TEST(RecordBuilder, ScoresQualityTasksAndAFailedRequestCountsAsWrong) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  auto quality = spec.initQuality();
  quality.setTaskSet("arithmetic");
  quality.setNumericAnswers(true);
  auto tasks = quality.initTasks(4);
  const char* answers_expected[] = {"95", "-3", "84", "7"};
  for (unsigned i = 0; i < 4; ++i) {
    tasks[i].setPrompt("q");
    tasks[i].setAnswer(answers_expected[i]);
  }
  std::vector<loadgen::Answer> answers(4);
  answers[0] = {true, " 95 t1 t2", ""};
  answers[1] = {true, "-3", ""};
  answers[2] = {true, " 85 t1", ""};           // wrong
  answers[3] = {false, "", "HTTP 500: boom"};  // no answer
  const QualityScore score = ScoreQuality(spec.asReader(), answers);
  EXPECT_EQ(score.tasks, 4u);
  EXPECT_EQ(score.correct, 2u);
  EXPECT_EQ(score.failed, 1u);
  EXPECT_EQ(score.first_error, "HTTP 500: boom");

  capnp::MallocMessageBuilder out;
  auto result = out.initRoot<schema::RunResult>();
  FillConditions(spec.asReader(), NodeFacts{}, RunSettingsFor(spec.asReader(), "").load,
                 result.initRecord());
  EXPECT_TRUE(std::isnan(result.getRecord().getQualityAccuracy()));  // n/a until scored
  FillQuality(score, result.getRecord());
  EXPECT_DOUBLE_EQ(result.getRecord().getQualityAccuracy(), 0.5);
  EXPECT_EQ(std::string(result.getRecord().getQualityTaskSet().cStr()),
            "arithmetic (4 tasks, max_tokens 16)");

  // Answer bodies of both APIs.
  std::string text;
  EXPECT_TRUE(loadgen::ParseAnswerText(R"({"choices":[{"index":0,"text":" 95"}]})", &text));
  EXPECT_EQ(text, " 95");
  EXPECT_TRUE(loadgen::ParseAnswerText(
      R"({"choices":[{"message":{"role":"assistant","content":"Paris"}}]})", &text));
  EXPECT_EQ(text, "Paris");
  EXPECT_FALSE(loadgen::ParseAnswerText(R"({"choices":[]})", &text));
  EXPECT_FALSE(loadgen::ParseAnswerText("not json", &text));
}

}  // namespace
}  // namespace servesweep::record
