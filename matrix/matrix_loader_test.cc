// Matrix expansion and its error messages (file:line:column, expected, found, did-you-mean).
#include "matrix/matrix_loader.h"

#include <gtest/gtest.h>

#include <set>

namespace servesweep::matrix {
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
  Status engine =
      Expand(std::string(kBase) + "concurrency: 1\naxes: {engine: [sim, trtllm]}\n", &m2);
  EXPECT_NE(engine.message().find("engine 'trtllm' is not supported by this build"),
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

TEST(MatrixLoader, ReadsEngineConfigAndSweepsItAsAnAxis) {
  LoadedMatrix m;
  Status s = Expand(R"(name: e
engine: llamacpp
model: smollm2
engine_config:
  model_path: /opt/m.gguf
  threads: 2
  context_len: 4096
  prefix_caching: false
  chunked_prefill: default
  speculative: {method: eagle3, model: /d, num_tokens: 3, eagle_topk: 4, num_draft_tokens: 8}
  price: {input_per_mtok: 0.25, output_per_mtok: 1.5, currency: USD}
workload: {input_len: 10, output_len: 5, num_requests: 3}
axes:
  engine_config: [{max_num_seqs: 1}, {max_num_seqs: 4}]
  concurrency: [1, 4]
)",
                    &m);
  ASSERT_TRUE(s.ok()) << s.message();
  auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[3].getLabel(), "max_num_seqs=4 concurrency=4");
  const auto c = runs[3].getEngineConfig();
  EXPECT_EQ(c.getMaxNumSeqs(), 4u);
  EXPECT_EQ(c.getModelPath(), "/opt/m.gguf");  // the top-level config stays under the axis
  EXPECT_EQ(c.getThreads(), 2u);
  EXPECT_EQ(c.getPrefixCaching(), schema::EngineConfig::Toggle::OFF);
  EXPECT_EQ(c.getChunkedPrefill(), schema::EngineConfig::Toggle::DEFAULT);
  EXPECT_EQ(c.getSpecMethod(), "eagle3");
  EXPECT_EQ(c.getSpecNumTokens(), 3u);
  EXPECT_EQ(c.getSpecEagleTopk(), 4u);
  EXPECT_EQ(c.getSpecNumDraftTokens(), 8u);
  EXPECT_EQ(c.getPriceOutputPerMTok(), 1.5);
  EXPECT_NE(runs[0].getRunId(), runs[2].getRunId());
}

TEST(MatrixLoader, EngineConfigErrorsNamePositionAndSuggestion) {
  LoadedMatrix m;
  Status typo =
      Expand(std::string(kBase) + "concurrency: 1\nengine_config: {max_num_seq: 4}\n", &m);
  EXPECT_NE(typo.message().find("m.yaml:6:17: unknown key 'max_num_seq' in engine_config (did "
                                "you mean 'max_num_seqs'?)"),
            std::string::npos)
      << typo.message();
  LoadedMatrix m2;
  Status external = Expand(R"(name: x
engine: external
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3, concurrency: 1}
)",
                           &m2);
  EXPECT_NE(external.message().find("expected 'engine_config.base_url' for engine: external"),
            std::string::npos)
      << external.message();
  LoadedMatrix m3;
  Status fraction = Expand(
      std::string(kBase) + "concurrency: 1\nengine_config: {gpu_memory_fraction: 1.5}\n", &m3);
  EXPECT_NE(fraction.message().find("expected 'gpu_memory_fraction' in (0, 1], found 1.5"),
            std::string::npos)
      << fraction.message();
}

TEST(MatrixLoader, DataParallelAttentionSharesTheInstancesGpus) {
  LoadedMatrix m;
  ASSERT_TRUE(Expand(std::string(kBase) + R"(concurrency: 1
axes:
  layout: [{tp: 8, dp: 8, dp_attention: true}, {tp: 8, dp: 2}]
)",
                     &m)
                  .ok());
  EXPECT_EQ(m.matrix().getRuns()[0].getGpusNeeded(), 8u);
  EXPECT_TRUE(m.matrix().getRuns()[0].getLayout().getDpAttention());
  EXPECT_EQ(m.matrix().getRuns()[1].getGpusNeeded(), 16u);
  LoadedMatrix m2;
  Status uneven = Expand(
      std::string(kBase) + "concurrency: 1\nlayout: {tp: 8, dp: 3, dp_attention: true}\n", &m2);
  EXPECT_NE(uneven.message().find("expected dp_attention groups to split tp evenly"),
            std::string::npos)
      << uneven.message();
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
  ASSERT_EQ(m.matrix().getRuns().size(), 10u);  // 2 layouts x 5 levels
  EXPECT_EQ(m.local.agents, 2u);
  // The zip sets each level's requests with it.
  const auto last = m.matrix().getRuns()[9].getWorkload();
  EXPECT_EQ(last.getConcurrency(), 256u);
  EXPECT_EQ(last.getNumRequests(), 256u);
}

}  // namespace
}  // namespace servesweep::matrix
