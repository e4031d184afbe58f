#include "sim/model_backed_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

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

// Served adapters cost what the model says: with one slot (--max-loras 1) two adapters take
// turns, so four requests over them end later than with a slot each; without adapters served,
// a request's adapter costs nothing.
TEST(ModelBackedCore, ServedAdaptersTakeTheModelsSlots) {
  struct Collect : TokenSink {  // the span from the first token to the last
    int64_t first_ns = kNever, last_ns = 0;
    void OnEvent(const TokenEvent& e) override {
      first_ns = std::min(first_ns, e.time_ns);
      last_ns = std::max(last_ns, e.time_ns);
    }
  };
  auto last_token_ns = [](std::vector<std::string> adapters, int32_t max_loras) {
    EmulatorSettings settings;
    settings.lora_adapters = std::move(adapters);
    settings.max_loras = max_loras;
    std::unique_ptr<EngineCore> core;
    EXPECT_TRUE(MakeModelBackedCore(Llama8bOnH100(), true, &settings, &core).ok());
    for (uint64_t id = 0; id < 4; ++id) {
      core->Submit({id, 0, 200, 50, {}, static_cast<int32_t>(id % 2)});
    }
    Collect sink;
    for (int64_t next = core->NextEventNs(); next != kNever; next = core->NextEventNs()) {
      core->AdvanceTo(next, sink);
    }
    return sink.last_ns - sink.first_ns;
  };
  const int64_t one_slot = last_token_ns({"a", "b"}, 1);
  const int64_t two_slots = last_token_ns({"a", "b"}, 2);
  const int64_t no_lora = last_token_ns({}, 0);
  EXPECT_GT(one_slot, two_slots * 3 / 2);  // adapter b's requests wait for a's to end
  EXPECT_GT(two_slots, no_lora);
}

}  // namespace
}  // namespace servesweep::sim
