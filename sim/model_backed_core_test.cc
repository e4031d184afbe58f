#include "sim/model_backed_core.h"

#include <gtest/gtest.h>

namespace servesweep::sim {
namespace {

ModelBackedOptions Llama8bOnH100() {
  ModelBackedOptions options;
  options.hardware = "h100";
  options.model_profile = "llama-3.1-8b";
  return options;
}

// The emulator agrees with the model it serves: ready after the model's cold start unless a
// startup was asked for, no request longer than the model's KV cache.
TEST(ModelBackedCore, TheEmulatorTakesTheModelsColdStartAndKvLimit) {
  EmulatorSettings settings;
  settings.max_model_len = int64_t{1} << 40;
  std::unique_ptr<EngineCore> core;
  Status s = MakeModelBackedCore(Llama8bOnH100(), false, &settings, &core);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_NE(core, nullptr);
  EXPECT_GT(settings.startup_ms, 1000);  // loading 16 GB of weights takes seconds
  EXPECT_LT(settings.max_model_len, int64_t{1} << 40);
  EXPECT_GT(settings.max_model_len, 100000);  // an H100's spare memory holds >100k tokens of KV

  EmulatorSettings given;
  given.startup_ms = 7;
  given.max_model_len = 512;
  s = MakeModelBackedCore(Llama8bOnH100(), true, &given, &core);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(given.startup_ms, 7);       // --startup-ms wins
  EXPECT_EQ(given.max_model_len, 512);  // a smaller limit stays
}

TEST(ModelBackedCore, TheModelProfileIsInferredFromTheServedNameOrRefused) {
  ModelBackedOptions options = Llama8bOnH100();
  options.model_profile.clear();
  EmulatorSettings settings;
  settings.model_name = "meta-llama/Llama-3.1-8B-Instruct";
  std::unique_ptr<EngineCore> core;
  Status s = MakeModelBackedCore(options, false, &settings, &core);
  EXPECT_TRUE(s.ok()) << s.message();
  settings.model_name = "no-such-model";
  s = MakeModelBackedCore(options, false, &settings, &core);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no-such-model"), std::string::npos) << s.message();
  options = Llama8bOnH100();
  options.hardware = "no-such-gpu";
  s = MakeModelBackedCore(options, false, &settings, &core);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no-such-gpu"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace servesweep::sim
