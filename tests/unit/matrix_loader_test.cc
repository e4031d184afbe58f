// Matrix expansion and its error messages (file:line:column, expected, found, did-you-mean).
#include "coordinator/matrix_loader.h"

#include <gtest/gtest.h>

#include <set>

namespace servesweep::coordinator {
namespace {

const char* kBase = R"(name: t
engine: sim
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3}
)";

Status Expand(const std::string& text, LoadedMatrix* out) {
  return ExpandMatrix("m.yaml", text, out);
}

TEST(MatrixLoader, CartesianProductFirstAxisSlowest) {
  LoadedMatrix m;
  ASSERT_TRUE(Expand(std::string(kBase) + R"(repeats: 2
axes:
  layout: [{tp: 1}, {tp: 2, pp: 2}]
  concurrency: [1, 8, 64]
)",
                     &m)
                  .ok());
  auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 12u);
  EXPECT_EQ(runs[0].getLabel(), "tp=1 concurrency=1 repeat=0");
  EXPECT_EQ(runs[1].getLabel(), "tp=1 concurrency=1 repeat=1");
  EXPECT_EQ(runs[11].getLabel(), "tp=2 pp=2 concurrency=64 repeat=1");
  EXPECT_EQ(runs[11].getLayout().getTp(), 2u);
  EXPECT_EQ(runs[11].getLayout().getPp(), 2u);
  EXPECT_EQ(runs[11].getGpusNeeded(), 4u);
  EXPECT_EQ(runs[11].getWorkload().getConcurrency(), 64u);
  EXPECT_EQ(runs[11].getWorkload().getInputLenTok(), 10u);
  EXPECT_EQ(runs[11].getWorkload().getName(), "fixed-in10-out5");
  // Ids are unique and stable across loads of the same text.
  LoadedMatrix again;
  ASSERT_TRUE(Expand(m.text, &again).ok());
  std::set<std::string> ids;
  for (size_t i = 0; i < runs.size(); ++i) {
    ids.insert(runs[i].getRunId());
    EXPECT_EQ(runs[i].getRunId(), again.matrix().getRuns()[i].getRunId());
  }
  EXPECT_EQ(ids.size(), runs.size());
}

TEST(MatrixLoader, DisaggregatedLayoutCountsBothPools) {
  LoadedMatrix m;
  ASSERT_TRUE(Expand(std::string(kBase) + "concurrency: 4\nlayout: {tp: 2, prefill_instances: 1, "
                                          "decode_instances: 3, gpus_per_node: 4}\n",
                     &m)
                  .ok());
  EXPECT_EQ(m.matrix().getRuns()[0].getGpusNeeded(), 8u);
  EXPECT_EQ(m.matrix().getRuns()[0].getNodesNeeded(), 2u);
}

TEST(MatrixLoader, UnknownKeyNamesPositionAndSuggestion) {
  LoadedMatrix m;
  Status s = Expand(std::string(kBase) + "concurency: 4\n", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("m.yaml:5:1:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("unknown key 'concurency'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did you mean 'concurrency'"), std::string::npos) << s.message();
}

TEST(MatrixLoader, WrongTypeSaysExpectedAndFound) {
  LoadedMatrix m;
  Status s = Expand(std::string(kBase) + "concurrency: 4\naxes:\n  layout: [{tp: two}]\n", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("m.yaml:7:17:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("expected 'tp' to be an integer, found 'two'"), std::string::npos)
      << s.message();
}

TEST(MatrixLoader, RefusesWhatCannotRun) {
  LoadedMatrix m;
  Status no_load = Expand(kBase, &m);
  EXPECT_NE(no_load.message().find("expected 'concurrency' (closed loop) or 'request_rate'"),
            std::string::npos)
      << no_load.message();
  LoadedMatrix m2;
  Status engine = Expand(std::string(kBase) + "concurrency: 1\naxes: {engine: [sim, vllm]}\n", &m2);
  EXPECT_NE(engine.message().find("engine 'vllm' is not supported by this build"),
            std::string::npos)
      << engine.message();
  EXPECT_NE(engine.message().find("m.yaml:6:"), std::string::npos) << engine.message();
  LoadedMatrix m3;
  Status syntax = Expand("name: [unclosed\n", &m3);
  EXPECT_NE(syntax.message().find("m.yaml:2:"), std::string::npos) << syntax.message();
  LoadedMatrix m4;
  Status zero = Expand(std::string(kBase) + "concurrency: 0\n", &m4);
  EXPECT_NE(zero.message().find("expected 'concurrency' to be an integer >= 1, found 0"),
            std::string::npos)
      << zero.message();
}

TEST(MatrixLoader, RefusesZeroTimeoutAndNamesUnfitForFiles) {
  LoadedMatrix m;
  Status timeout = Expand(std::string(kBase) + "concurrency: 1\ntimeout_s: 0\n", &m);
  EXPECT_NE(timeout.message().find("m.yaml:6:12: expected 'timeout_s' to be > 0 seconds, found 0"),
            std::string::npos)
      << timeout.message();
  LoadedMatrix m2;
  Status name = Expand(
      "name: a/b\nengine: sim\nmodel: m\nconcurrency: 1\n"
      "workload: {input_len: 1, output_len: 1, num_requests: 1}\n",
      &m2);
  EXPECT_NE(name.message().find("m.yaml:1:7: expected 'name' of letters, digits"),
            std::string::npos)
      << name.message();
}

TEST(MatrixLoader, ReadsTheProbesSection) {
  LoadedMatrix m;
  ASSERT_TRUE(Expand(std::string(kBase) +
                         "concurrency: 1\nprobes: {enabled: true, exclude_unhealthy: true}\n",
                     &m)
                  .ok());
  EXPECT_TRUE(m.matrix().getProbes().getEnabled());
  EXPECT_TRUE(m.matrix().getProbes().getExcludeUnhealthy());
  EXPECT_EQ(m.matrix().getProbes().getRepeats(), 5u);
  LoadedMatrix m2;
  Status s = Expand(std::string(kBase) + "concurrency: 1\nprobes: {enable: true}\n", &m2);
  EXPECT_NE(s.message().find("unknown key 'enable' in probes (did you mean 'enabled'?)"),
            std::string::npos)
      << s.message();
}

TEST(MatrixLoader, QuickstartExampleExpands) {
  LoadedMatrix m;
  Status s = LoadMatrixFile(SERVESWEEP_SOURCE_DIR "/examples/quickstart.yaml", &m);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(m.matrix().getRuns().size(), 6u);
  EXPECT_EQ(m.local.agents, 2u);
}

}  // namespace
}  // namespace servesweep::coordinator
