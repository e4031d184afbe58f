#include "search/search_spec.h"

#include <gtest/gtest.h>

#include <string>

namespace servesweep::search {
namespace {

// The matrix keys a search ignores (they are the runs'), then a section.
std::string Matrix(const std::string& section) {
  return "name: s\nengine: sim\nmodel: m\n" + section;
}

Status Parse(const std::string& section, SearchSpec* spec) {
  return ParseSearchSpec("m.yaml", Matrix(section), spec);
}

std::string ErrorOf(const std::string& section) {
  SearchSpec spec;
  const Status s = Parse(section, &spec);
  EXPECT_FALSE(s.ok()) << section;
  return s.message();
}

TEST(SearchSpec, ReadsEveryKey) {
  SearchSpec spec;
  const Status s = Parse(
      "search:\n"
      "  objective: min_cost_per_m_output_tok\n"
      "  constraints:\n"
      "    ttft_p90_ms: {max: 2000}\n"
      "    decode_median_tok_per_s: {min: 150}\n"
      "    success_rate: {min: 0.99}\n"
      "  load: {knob: request_rate, min: 0.5, max: 64}\n"
      "  precision: 0.1\n"
      "  boundary_repeats: 5\n"
      "  noise_pct: 3\n"
      "  requests_per_level: 8\n"
      "  budget: {runs: 60, gpu_hours: 4, wall_s: 3600}\n",
      &spec);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(spec.objective, Objective::kMinCostPerMOutputTok);
  ASSERT_EQ(spec.constraints.size(), 3u);
  EXPECT_EQ(spec.constraints[0].column, "ttft_p90_ms");
  EXPECT_TRUE(spec.constraints[0].is_max);
  EXPECT_EQ(spec.constraints[0].limit, 2000);
  EXPECT_EQ(spec.constraints[1].column, "decode_median_tok_per_s");
  EXPECT_FALSE(spec.constraints[1].is_max);
  EXPECT_EQ(spec.constraints[1].limit, 150);
  EXPECT_EQ(spec.constraints[2].limit, 0.99);
  EXPECT_EQ(spec.knob, LoadKnob::kRequestRate);
  EXPECT_EQ(spec.load_min, 0.5);
  EXPECT_EQ(spec.load_max, 64);
  EXPECT_EQ(spec.precision, 0.1);
  EXPECT_EQ(spec.boundary_repeats, 5);
  EXPECT_EQ(spec.noise_pct, 3);
  EXPECT_EQ(spec.requests_per_level, 8);
  EXPECT_EQ(spec.budget.runs, 60);
  EXPECT_EQ(spec.budget.gpu_hours, 4);
  EXPECT_EQ(spec.budget.wall_s, 3600);
}

TEST(SearchSpec, DefaultsAreTheDocumentedOnes) {
  SearchSpec spec;
  ASSERT_TRUE(Parse("search:\n  constraints: {ttft_p99_ms: {max: 500}}\n", &spec).ok());
  EXPECT_EQ(spec.objective, Objective::kMaxOutputTokPerSPerGpu);
  EXPECT_EQ(spec.knob, LoadKnob::kConcurrency);
  EXPECT_EQ(spec.load_min, 1);
  EXPECT_EQ(spec.load_max, 256);
  EXPECT_EQ(spec.precision, 0.05);
  EXPECT_EQ(spec.boundary_repeats, 3);
  EXPECT_EQ(spec.budget.runs, 0);
}

TEST(SearchSpec, ErrorsSayWhatWasExpectedFoundAndWhere) {
  EXPECT_NE(ErrorOf("").find("m.yaml: expected a 'search:' section"), std::string::npos);
  // Lines count from the matrix's top (three lines of run keys first).
  EXPECT_NE(ErrorOf("search:\n  constraints: {ttft_p42_ms: {max: 1}}\n")
                .find("m.yaml:5:17: expected a constrainable record column"),
            std::string::npos)
      << ErrorOf("search:\n  constraints: {ttft_p42_ms: {max: 1}}\n");
  EXPECT_NE(ErrorOf("search:\n  constraints:\n    success_rate: {max: 1}\n")
                .find("expected 'min' for success_rate (a floor), found 'max'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("search:\n  constraints:\n    ttft_p90_ms: {min: 1}\n")
                .find("expected 'max' for ttft_p90_ms (a latency), found 'min'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("search:\n  constraints:\n    ttft_p90_ms: {max: 0}\n")
                .find("expected a limit above 0 for ttft_p90_ms, found 0"),
            std::string::npos);
  EXPECT_NE(ErrorOf("search:\n  objective: fastest\n  constraints: {ttft_p90_ms: {max: 1}}\n")
                .find("m.yaml:5:14:"),
            std::string::npos);
  EXPECT_NE(ErrorOf("search:\n  objective: max_goodput_per_gpu\n")
                .find("expected at least one constraint under search.constraints"),
            std::string::npos);
  const std::string c = "  constraints: {ttft_p90_ms: {max: 1}}\n";
  EXPECT_NE(
      ErrorOf("search:\n  load: {min: 8, max: 4}\n" + c).find("expected max >= min (8), found 4"),
      std::string::npos);
  EXPECT_NE(ErrorOf("search:\n  load: {min: 1.5}\n" + c)
                .find("expected a whole concurrency for 'min', found 1.5"),
            std::string::npos);
  EXPECT_NE(ErrorOf("search:\n  precision: 1\n" + c).find("expected 'precision' in (0, 1)"),
            std::string::npos);
  EXPECT_NE(ErrorOf("search:\n  budget: {hours: 1}\n" + c).find("hours"), std::string::npos);
  EXPECT_NE(ErrorOf("search:\n  objectve: x\n" + c).find("objectve"), std::string::npos);
}

TEST(SearchSpec, ObjectivesNameTheirColumns) {
  EXPECT_STREQ(InfoOf(Objective::kMaxOutputTokPerSPerGpu).column, "output_throughput_per_gpu");
  EXPECT_STREQ(InfoOf(Objective::kMinCostPerMOutputTok).column, "cost_per_mtok_output");
  EXPECT_FALSE(InfoOf(Objective::kMinCostPerMOutputTok).higher_is_better);
  EXPECT_STREQ(InfoOf(Objective::kMaxTokPerSPerUser).column, "decode_median_tok_per_s");
  EXPECT_STREQ(InfoOf(Objective::kMinEnergyPerOutputTokJ).column, "energy_per_output_tok_j");
  EXPECT_FALSE(InfoOf(Objective::kMinEnergyPerOutputTokJ).higher_is_better);
}

// Energy as the objective or a constraint (a ceiling): either makes the search count only runs
// whose energy is valid.
TEST(SearchSpec, EnergyIsAnObjectiveAndACeiling) {
  SearchSpec spec;
  ASSERT_TRUE(Parse("search:\n  objective: min_energy_per_output_tok_j\n"
                    "  constraints: {ttft_p90_ms: {max: 500}}\n",
                    &spec)
                  .ok());
  EXPECT_EQ(spec.objective, Objective::kMinEnergyPerOutputTokJ);
  EXPECT_TRUE(UsesEnergy(spec));
  ASSERT_TRUE(Parse("search:\n  constraints:\n    energy_per_request_j: {max: 90}\n", &spec).ok());
  ASSERT_EQ(spec.constraints.size(), 1u);
  EXPECT_TRUE(spec.constraints[0].is_max);
  EXPECT_TRUE(UsesEnergy(spec));
  ASSERT_TRUE(Parse("search:\n  constraints: {ttft_p90_ms: {max: 5}}\n", &spec).ok());
  EXPECT_FALSE(UsesEnergy(spec));
  EXPECT_NE(ErrorOf("search:\n  constraints:\n    energy_per_output_tok_j: {min: 1}\n")
                .find("expected 'max' for energy_per_output_tok_j (a ceiling), found 'min'"),
            std::string::npos);
}

}  // namespace
}  // namespace servesweep::search
