// End-to-end: a set prefix-cache hit rate (`workload.prefix_hit_rate`) against the emulator's
// prefix cache (its performance model, 512-token blocks) and llama.cpp's server (its slots'
// caches, token by token): targets 0, 0.5 and 0.9 on one engine, reset between the runs, primed
// by the warm-up, and the rate each engine's own counters measured over the measured phase within
// 5 points of the target, so the validity gate calls each run valid.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Every run's target, measured rate, verdict and cache state, in target order.
void ExpectEveryTargetMet(Harness& h, const std::string& out) {
  const auto table = h.Query(out,
                             "SELECT prefix_hit_rate_target, prefix_hit_rate, validity, "
                             "validity_reasons, cache_state FROM results "
                             "ORDER BY prefix_hit_rate_target");
  ASSERT_EQ(table.rows.size(), 3u);
  const double targets[] = {0, 0.5, 0.9};
  for (size_t i = 0; i < 3; ++i) {
    const auto& row = table.rows[i];
    EXPECT_DOUBLE_EQ(std::stod(row[0]), targets[i]);
    ASSERT_FALSE(row[1].empty()) << "no rate measured at target " << targets[i] << ": " << row[3];
    EXPECT_NEAR(std::stod(row[1]), targets[i], 0.05) << row[3];
    EXPECT_EQ(row[2], "valid") << row[3];
    EXPECT_NE(row[4].rfind("not_reset", 0), 0u) << row[4];
  }
}

TEST(PrefixHitRate, TheEmulatorsCacheServesTheRateSetOnOneEngine) {
  Harness h("prefix-hit-rate-sim");
  // 5,120-token prompts: 0, 5 and 9 whole 512-token blocks shared.
  const std::string matrix = h.WriteFile("m.yaml", R"(name: hit-rate
engine: sim
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h200, startup_ms: 50}
workload: {input_len: 5120, output_len: 4, num_requests: 8, warmup_requests: 2, concurrency: 2,
           prompt: token_ids}
axes:
  prefix_hit_rate: [0, 0.5, 0.9]
)");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, h.Path("out")), &output), 0)
      << output;
  ExpectEveryTargetMet(h, h.Path("out"));
  // The three runs shared one engine (one configuration), reset between them.
  EXPECT_EQ(h.QueryInt(h.Path("out"), "SELECT COUNT(DISTINCT engine_id) FROM results"), 1);
  // Exact here: the emulator counts whole blocks, all of them primed.
  EXPECT_EQ(
      h.QueryInt(h.Path("out"),
                 "SELECT COUNT(*) FROM results WHERE prefix_hit_rate = prefix_hit_rate_target"),
      3);
}

TEST(PrefixHitRate, LlamacppsSlotsServeTheRateSetOnOneEngine) {
  if (!OnPath("llama-server") || !std::filesystem::exists(kSmolLm2Gguf)) {
    GTEST_SKIP() << "llama-server or " << kSmolLm2Gguf
                 << " is not installed: run scripts/install-engines.sh to run this test";
  }
  Harness h("prefix-hit-rate-llamacpp");
  // Two slots, both primed by the two concurrent warm-up requests; 40-token prompts share 0, 20
  // or 36 tokens (short: one engine thread prefills about 100 tokens a second).
  const std::string matrix = h.WriteFile("m.yaml", fmt::format(R"(name: hit-rate
engine: llamacpp
model: smollm2-hit-rate
engine_config: {{model_path: {}, threads: 1, context_len: 1024, max_num_seqs: 2}}
workload: {{api: completions, prompt: token_ids, input_len: 40, output_len: 4, num_requests: 6,
           warmup_requests: 2, concurrency: 2}}
timeout_s: 120
max_attempts: 1
local: {{agents: 1, gpus_per_agent: 1}}
axes:
  prefix_hit_rate: [0, 0.5, 0.9]
)",
                                                               kSmolLm2Gguf));
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, h.Path("out")), &output), 0)
      << output;
  ExpectEveryTargetMet(h, h.Path("out"));
  EXPECT_EQ(h.QueryInt(h.Path("out"), "SELECT COUNT(DISTINCT engine_id) FROM results"), 1);
}

}  // namespace
}  // namespace servesweep::testing
