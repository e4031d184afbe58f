// Fidelity against a real engine on this machine: llama.cpp's llama-server with SmolLM2-135M,
// measured by servesweep's own load generator at three concurrencies and two prompt lengths in
// one sweep; `servesweep calibrate` fits the llama.cpp engine profile on the short prompts at
// every concurrency and the long prompts alone (concurrency 1), and predicts the long prompts at
// concurrency 2 and 4, which it never saw; the held-out figures' median |error| must be at most
// 15% plus half the spread the test measured between repeats of the same point: a model that
// predicted each pair's midpoint exactly would be that far off, so no model can do better on
// the measurements of a machine that slowed down between them. (On this shared 2-core machine
// repeats have been 4% apart when quiet and 32% under other jobs; the quiet figure is the one
// the issue's 15% bar is judged on: bench/perfmodel_fidelity.sh, docs/perfmodel.md.) A spread
// over 50% cannot judge a model and fails. The engine gets one thread (the load generator has
// the other core), the sweep is short and measured in one go (a drift moves fitted and held-out
// points alike), each point is measured twice (the fit sees both), and the bar is a median over
// sixteen figures (medians of requests within each). Skipped, saying why, where llama-server or
// the model is not installed.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "perfmodel/calibration.h"
#include "perfmodel/engine_profile.h"
#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Input 16 and 64 tokens, 16 output tokens, concurrency 1, 2 and 4, 8 measured requests each
// after 2 warm-up ones, twice; concurrency is the outer axis, so each held-out run is measured
// right after the fitted run of the same concurrency (a slow spell of the machine then moves
// both). The fit minimises the absolute log error: one run slowed by another process pulls it
// less than a squared error would. (Holding out concurrency 2 instead is less stable: two identical
// closed-loop streams stay in lockstep in the model but drift apart in the engine, and whether a
// prompt stalls the other stream's decode then varies from run to run.)
constexpr const char* kMatrix = R"(name: llamacpp-fidelity
engine: llamacpp
model: smollm2
engine_config:
  model_path: {model}
  threads: 1
  context_len: 2048
  max_num_seqs: 4
workload:
  api: completions
  prompt: token_ids
  output_len: 16
  num_requests: 8
  warmup_requests: 2
  ignore_eos: true
timeout_s: 120
max_attempts: 1
repeats: 2
local: {{agents: 1, gpus_per_agent: 1}}
axes:
  concurrency: [1, 2, 4]
  input_len: [16, 64]
)";

// The figures compared, as results.db names them.
constexpr const char* kFigures[] = {"ttft_median_ms", "tpot_median_ms", "e2el_median_ms",
                                    "output_throughput"};

// The median over every figure of every point of |repeat 0 - repeat 1| / their mean.
double RepeatSpread(const Harness& h, const std::string& out) {
  std::string sql = "SELECT r.label";
  for (const char* f : kFigures) sql += fmt::format(", s.{}", f);
  sql += " FROM results s JOIN runs r ON r.run_id = s.run_id ORDER BY r.idx";
  const results::Table table = h.Query(out, sql);
  std::map<std::string, std::vector<std::vector<double>>> by_point;  // label without its repeat
  for (const auto& row : table.rows) {
    std::string point = row[0];
    if (const size_t at = point.find(" repeat="); at != std::string::npos) point.erase(at);
    std::vector<double> figures;
    for (size_t i = 1; i < row.size(); ++i) figures.push_back(std::stod(row[i]));
    by_point[point].push_back(std::move(figures));
  }
  std::vector<double> spreads;
  for (const auto& [point, repeats] : by_point) {
    if (repeats.size() != 2) continue;
    for (size_t i = 0; i < repeats[0].size(); ++i) {
      const double a = repeats[0][i], b = repeats[1][i];
      spreads.push_back(std::abs(a - b) / ((a + b) / 2));
    }
  }
  return perfmodel::MedianAbs(std::move(spreads));  // NaN without pairs: fails the check below
}

// One line per held-out figure: what the log of a failed run needs, in a screen.
std::string HeldOutTable(const nlohmann::json& result) {
  std::string table;
  for (const auto& p : result["points"]) {
    if (!p["held_out"].get<bool>()) continue;
    table += fmt::format("  {:<46} {:<18} measured {:>9.2f} predicted {:>9.2f} {:+.1f}%\n",
                         p["point"].get<std::string>(), p["metric"].get<std::string>(),
                         p["measured"].get<double>(), p["predicted"].get<double>(),
                         p["error"].get<double>() * 100);
  }
  return table;
}

// The coefficients a CPU engine's points constrain: compute and weight-streaming efficiency,
// the fixed cost per layer, the CPU per step and per request in the batch, the front end.
constexpr const char* kFit =
    "kernels.gemm_efficiency,kernels.weight_read_efficiency,launch.layer_gpu_us,cpu.step_us,"
    "cpu.seq_us,cpu.request_us";

TEST(LlamacppFidelity, CalibratedOnSomePointsPredictsTheHeldOutOnes) {
  if (!OnPath("llama-server") || !std::filesystem::exists(kSmolLm2Gguf)) {
    GTEST_SKIP() << "llama-server or " << kSmolLm2Gguf
                 << " is not installed: run scripts/install-engines.sh to run this fidelity test";
  }
  Harness h("llamacpp-fidelity");
  const std::string matrix =
      h.WriteFile("fidelity.yaml", fmt::format(kMatrix, fmt::arg("model", kSmolLm2Gguf)));
  const std::string out = h.Path("out");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, out), &output), 0) << output;
  ASSERT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM results WHERE completed = 8"), 12) << output;

  // The fit starts from the shipped profile's coefficients with its calibration cleared: a
  // refit on today's measurements, not a stage after the shipped fit. (From the profile's first
  // guesses the fit stops in a local minimum, held-out error about 25%: docs/perfmodel.md.)
  perfmodel::EngineProfile start;
  const Status loaded = perfmodel::LoadEngineProfile("llamacpp", &start);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  start.calibration = {};
  const std::string start_path =
      h.WriteFile("llamacpp-start.yaml", perfmodel::EngineProfileYaml(start, "fit start"));
  const std::string fitted = h.Path("llamacpp-fitted.yaml");
  ASSERT_EQ(
      RunServesweep(fmt::format("calibrate --db {}/results.db --hardware cpu-2core "
                                "--model-profile smollm2-135m --engine-profile {} "
                                "--fit {} --holdout 'input_len=64,concurrency=2|4' --loss absolute "
                                "--out {} --json",
                                out, start_path, kFit, fitted),
                    &output),
      0)
      << output;
  const nlohmann::json result = nlohmann::json::parse(output.substr(output.find('{')));
  // Kept for the issue note and for refitting the shipped profile (profiles/engines/llamacpp.yaml).
  const std::string artifacts = std::string(SERVESWEEP_BUILD_DIR) + "/test-artifacts/fidelity";
  std::filesystem::create_directories(artifacts);
  std::ofstream(artifacts + "/llamacpp-calibration.json") << result.dump(2);
  std::filesystem::copy_file(fitted, artifacts + "/llamacpp-fitted.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(out + "/results.db", artifacts + "/llamacpp-results.db",
                             std::filesystem::copy_options::overwrite_existing);

  size_t held_out = 0;
  for (const auto& p : result["points"]) held_out += p["held_out"].get<bool>() ? 1 : 0;
  EXPECT_EQ(held_out, 16u);  // two points x two repeats x four figures
  const double held = result["held_out_median_abs_error"].get<double>();
  const double spread = RepeatSpread(h, out);
  std::ofstream(artifacts + "/llamacpp-repeat-spread.txt") << spread << "\n";
  ASSERT_LE(spread, 0.5) << "repeats " << spread * 100
                         << "% apart at the median: this machine was too busy to judge a model";
  const double bar = 0.15 + spread / 2;
  EXPECT_LE(held, bar) << fmt::format(
      "held-out median |error| {:.1f}% over the bar {:.1f}% (15% + half the repeats' spread "
      "{:.1f}%); fitted {:.1f}%\n{}",
      held * 100, bar * 100, spread * 100, result["median_abs_error"].get<double>() * 100,
      HeldOutTable(result));
  std::cout << fmt::format("held-out median |error| {:.1f}% (bar {:.1f}%), repeats {:.1f}% apart\n",
                           held * 100, bar * 100, spread * 100);
  // The written profile reads back, says what it was fitted on, and only that.
  perfmodel::EngineProfile profile;
  const Status s = perfmodel::LoadEngineProfile(fitted, &profile);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(profile.calibration.fitted);
  EXPECT_EQ(profile.calibration.points, 8);  // four points x two repeats
  EXPECT_EQ(profile.calibration.range.models, std::vector<std::string>{"smollm2-135m"});
  EXPECT_EQ(profile.calibration.range.hardware, std::vector<std::string>{"cpu-2core"});
  EXPECT_NEAR(profile.calibration.fit_error_pct, result["median_abs_error"].get<double>() * 100,
              0.06);
}

}  // namespace
}  // namespace servesweep::testing
