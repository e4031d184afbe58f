#include "matrix/engine_configuration.h"

#include <gtest/gtest.h>

#include "matrix/matrix_loader.h"

namespace servesweep::matrix {
namespace {

const char* kBase = R"(name: t
engine: sim
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3, concurrency: 1}
repeats: 2
)";

TEST(EngineConfiguration, LoadLevelsAndRepeatsShareOneEngineOtherEngineKeysDoNot) {
  LoadedMatrix m;
  const Status s = ExpandMatrix("m.yaml", std::string(kBase) + R"(axes:
  layout: [{tp: 1}, {tp: 2}]
  concurrency: [1, 8]
  slo: [{ttft_ms: 100}, {ttft_ms: 200}]
)",
                                &m);
  ASSERT_TRUE(s.ok()) << s.message();
  auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 16u);
  const std::string tp1 = runs[0].getEngineConfiguration();
  const std::string tp2 = runs[8].getEngineConfiguration();
  EXPECT_EQ(tp1.rfind("cfg-", 0), 0u);
  EXPECT_EQ(tp1.size(), 16u);
  EXPECT_NE(tp1, tp2);
  for (uint32_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].getEngineConfiguration(), i < 8 ? tp1 : tp2) << runs[i].getLabel().cStr();
    EXPECT_EQ(runs[i].getEngineConfiguration(), EngineConfigurationOf(runs[i]));
    EXPECT_EQ(runs[i].getEngineLifecycle(), schema::EngineLifecycle::PER_CONFIGURATION);
  }
}

TEST(EngineConfiguration, EveryEngineSideKeyMakesAnotherConfiguration) {
  std::set<std::string> seen;
  for (const char* keys : {"", "engine_version: '1'\n", "engine_flags: [--x]\n", "precision: fp8\n",
                           "kv_cache_dtype: fp8\n", "engine_config: {max_num_seqs: 8}\n",
                           "sim: {itl_ms: 3}\n", "engine_config: {model_path: /w}\n"}) {
    LoadedMatrix m;
    const Status s = ExpandMatrix("m.yaml", std::string(kBase) + keys, &m);
    ASSERT_TRUE(s.ok()) << keys << s.message();
    EXPECT_TRUE(seen.insert(m.matrix().getRuns()[0].getEngineConfiguration()).second) << keys;
  }
}

TEST(EngineConfiguration, TheLifecycleIsAKeyWithAPositionedError) {
  LoadedMatrix m;
  ASSERT_TRUE(ExpandMatrix("m.yaml", std::string(kBase) + "engine_lifecycle: per_run\n", &m).ok());
  EXPECT_EQ(m.matrix().getRuns()[0].getEngineLifecycle(), schema::EngineLifecycle::PER_RUN);
  const Status bad = ExpandMatrix("m.yaml", std::string(kBase) + "engine_lifecycle: forever\n", &m);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("m.yaml:6:19: expected 'engine_lifecycle' to be per_configuration"),
            std::string::npos)
      << bad.message();
}

}  // namespace
}  // namespace servesweep::matrix
