#include "calibration/calibrate.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "calibration/true_profile_for_test.h"
#include "testing/scratch_dir.h"

namespace servesweep::calibration {
namespace {

// Llama 3.1 8B on one H100 under vLLM 0.12 at three concurrencies: short virtual runs.
constexpr const char* kMatrix = R"(name: small
engine: vllm
engine_version: 0.12.0
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload: {input_len: 40, output_len: 100, num_requests: 24}
local: {agents: 1, gpus_per_agent: 1}
axes:
  concurrency: [1, 4, 8]
)";

struct Figures {
  double ttft_ms, tpot_ms;
};

// A table of one case over kMatrix, a point per concurrency with the given figures.
std::string Table(const std::vector<Figures>& figures, double bound_pct, double median_bound_pct,
                  const std::string& exclude_at_8 = "") {
  std::string text = fmt::format(
      "median_bound_pct: {}\ncases:\n  - name: small\n    source: test\n    conditions: test\n"
      "    matrix: small.yaml\n    bound_pct: {}\n    points:\n",
      median_bound_pct, bound_pct);
  const int levels[] = {1, 4, 8};
  for (size_t i = 0; i < figures.size(); ++i) {
    text += fmt::format(
        "      - match: {{concurrency: {}}}\n        figures: {{ttft_median_ms: {}, "
        "tpot_median_ms: {}}}\n",
        levels[i], figures[i].ttft_ms, figures[i].tpot_ms);
    if (levels[i] == 8 && !exclude_at_8.empty()) {
      text += fmt::format("        exclude: \"{}\"\n", exclude_at_8);
    }
  }
  return text;
}

// The model's own figures of kMatrix's points under `profile_path` (evaluation only).
std::vector<Figures> ModelFigures(const testing::ScratchDir& dir, const std::string& profile_path) {
  CalibrateRequest r;
  r.published = {dir.WriteFile("probe.yaml", Table({{1, 1}, {1, 1}, {1, 1}}, 0, 0))};
  r.engine_profile = profile_path;
  CalibrationReport report;
  const Status s = Calibrate(r, &report);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<Figures> out;
  for (const auto& row : report.points) {
    EXPECT_TRUE(row.prediction.status.ok()) << row.prediction.status.message();
    out.push_back({row.prediction.figures[0], row.prediction.figures[1]});
  }
  return out;
}

class CalibrateTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_.WriteFile("small.yaml", kMatrix); }
  testing::ScratchDir dir_{"calibrate"};
};

// Figures made by the model with a known coefficient are fitted back to it from a wrong start:
// the fit moves the coefficient, the profile records what it was fitted on.
TEST_F(CalibrateTest, TheFitRecoversTheCoefficientTheFiguresWereMadeWith) {
  double true_value = 0;
  const std::string truth_path = WriteTrueProfile(dir_, &true_value);
  const std::vector<Figures> figures = ModelFigures(dir_, truth_path);
  ASSERT_EQ(figures.size(), 3u);

  CalibrateRequest r;
  r.published = {dir_.WriteFile("table.yaml", Table(figures, 5, 5))};
  r.engine_profile = "vllm-0.12";
  r.fit = {"cpu.step_us"};
  r.fitted_by = "servesweep calibrate --engine-profile vllm-0.12 --fit cpu.step_us";
  r.fitted_at = "2026-12-02";
  r.fitted_name = "vllm-test";
  CalibrationReport report;
  const Status s = Calibrate(r, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(report.fitted);
  double fitted_value = 0;
  ASSERT_TRUE(perfmodel::GetCoefficient(*report.profile, "cpu.step_us", &fitted_value).ok());
  EXPECT_NEAR(fitted_value / true_value, 1, 0.05) << fitted_value << " vs " << true_value;
  EXPECT_LT(report.median_abs_error, 0.02);
  EXPECT_FALSE(report.broken);
  EXPECT_GT(report.fit_evaluations, 1);
  const perfmodel::Calibration& c = report.profile->calibration;
  EXPECT_TRUE(c.fitted);
  EXPECT_EQ(c.points, 3);
  EXPECT_EQ(c.fitted_at, "2026-12-02");
  // A fitted profile fitted again keeps the earlier stages' commands.
  const std::string then = "; then " + r.fitted_by;
  EXPECT_EQ(c.fitted_by.substr(c.fitted_by.size() - then.size()), then) << c.fitted_by;
  EXPECT_EQ(c.sources, std::vector<std::string>{"test"});
  EXPECT_EQ(report.profile->name, "vllm-test");
  for (const auto& row : report.points) EXPECT_TRUE(row.fitted) << row.point->id;
}

// Points and the profile handed over in memory (a search's own runs, its model's profile) are
// fitted as a table's are with a named profile.
TEST_F(CalibrateTest, PointsAndAProfileGivenDirectlyAreFittedAsATablesAre) {
  double true_value = 0;
  const std::string truth_path = WriteTrueProfile(dir_, &true_value);
  PointSet set;
  ASSERT_TRUE(LoadPublishedTable(
                  dir_.WriteFile("table.yaml", Table(ModelFigures(dir_, truth_path), 0, 0)), &set)
                  .ok());
  CalibrateRequest r;
  r.points = set.points;
  r.profile.emplace();
  ASSERT_TRUE(perfmodel::LoadEngineProfile("vllm-0.12", &*r.profile).ok());
  r.fit = {"cpu.step_us"};
  CalibrationReport report;
  const Status s = Calibrate(r, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(report.fitted);
  EXPECT_EQ(report.profile->calibration.points, 3);
  double fitted_value = 0;
  ASSERT_TRUE(perfmodel::GetCoefficient(*report.profile, "cpu.step_us", &fitted_value).ok());
  EXPECT_NEAR(fitted_value / true_value, 1, 0.05) << fitted_value << " vs " << true_value;
}

// A profile for MoE models fits no dense point (one kind's fit must not move the other's
// coefficients) and says why; the same profile for dense models fits them all.
TEST_F(CalibrateTest, AProfileFitsOnlyItsKindOfModel) {
  PointSet set;
  ASSERT_TRUE(LoadPublishedTable(
                  dir_.WriteFile("table.yaml", Table({{10, 5}, {12, 6}, {14, 7}}, 0, 0)), &set)
                  .ok());
  CalibrateRequest r;
  r.points = set.points;
  r.profile.emplace();
  ASSERT_TRUE(perfmodel::LoadEngineProfile("vllm-0.12", &*r.profile).ok());
  r.profile->architecture = perfmodel::kMoeArchitecture;
  EXPECT_FALSE(ProfileFits(*r.profile, r.points[0]));
  r.fit = {"cpu.step_us"};
  r.fit_options.max_evaluations = 20;
  CalibrationReport report;
  Status s = Calibrate(r, &report);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no point to fit vllm-0.12 to (its engine is vllm, its versions "
                             "0.12.0-, its models moe;"),
            std::string::npos)
      << s.message();
  r.profile->architecture = perfmodel::kDenseArchitecture;
  EXPECT_TRUE(ProfileFits(*r.profile, r.points[0]));
  CalibrationReport dense;
  s = Calibrate(r, &dense);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(dense.profile->calibration.points, 3);
}

// Evaluation only: a case over its bound breaks, the table's median bound is its own verdict,
// and a held-out point is predicted, counted apart, and never fitted.
TEST_F(CalibrateTest, ACaseOverItsBoundIsBrokenAtItsEdge) {
  const std::vector<Figures> exact = ModelFigures(dir_, "vllm-0.12");
  ASSERT_EQ(exact.size(), 3u);
  // Every figure 20% above the model's: the model is 1/1.2 - 1 = -16.7% off on each.
  std::vector<Figures> off;
  for (const auto& f : exact) off.push_back({f.ttft_ms * 1.2, f.tpot_ms * 1.2});
  for (const auto& [bound_pct, broken] :
       std::vector<std::pair<double, bool>>{{16, true}, {17, false}}) {
    CalibrateRequest r;
    r.published = {dir_.WriteFile("off.yaml", Table(off, bound_pct, 0))};
    r.engine_profile = "vllm-0.12";
    CalibrationReport report;
    ASSERT_TRUE(Calibrate(r, &report).ok());
    ASSERT_EQ(report.cases.size(), 1u);
    EXPECT_NEAR(report.cases[0].median_abs_error, 1 - 1 / 1.2, 1e-6);
    EXPECT_EQ(report.cases[0].ok, !broken) << bound_pct;
    EXPECT_EQ(report.broken, broken) << bound_pct;
    EXPECT_FALSE(report.fitted);
    for (const auto& row : report.points) EXPECT_FALSE(row.fitted);
  }
  // The table's median bound, with the case unbounded.
  CalibrateRequest r;
  r.published = {dir_.WriteFile("median.yaml", Table(off, 0, 10))};
  r.engine_profile = "vllm-0.12";
  r.holdout = "concurrency=4";
  CalibrationReport report;
  ASSERT_TRUE(Calibrate(r, &report).ok());
  EXPECT_FALSE(report.cases[0].bounded);
  EXPECT_EQ(report.bounded_figures, 0u);  // an unbounded case is not the table's either
  EXPECT_FALSE(report.broken);
  EXPECT_EQ(report.held_out_figures, 2u);
  EXPECT_EQ(report.median_figures, 4u);
  EXPECT_EQ(report.points[1].Note(), "held out");
}

TEST_F(CalibrateTest, ExcludedPointsAreReportedApartAndNeverFitted) {
  const std::vector<Figures> exact = ModelFigures(dir_, "vllm-0.12");
  std::vector<Figures> figures = exact;
  figures[2] = {exact[2].ttft_ms * 3, exact[2].tpot_ms * 3};  // a client-bound point
  CalibrateRequest r;
  r.published = {dir_.WriteFile("t.yaml", Table(figures, 5, 5, "client-bound"))};
  r.engine_profile = "vllm-0.12";
  r.fit = {"cpu.step_us"};
  CalibrationReport report;
  const Status s = Calibrate(r, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(report.profile->calibration.points, 2);
  EXPECT_FALSE(report.points[2].fitted);
  EXPECT_EQ(report.points[2].Note(), "excluded: client-bound");
  EXPECT_NEAR(report.cases[0].excluded_median_abs_error, 1 - 1.0 / 3, 0.02);
  EXPECT_LT(report.cases[0].median_abs_error, 0.02);
  EXPECT_FALSE(report.broken);
}

TEST_F(CalibrateTest, WrongInputsAreRefusedWithWhatWasExpected) {
  const std::string table = dir_.WriteFile("t.yaml", Table({{10, 5}, {11, 5}, {12, 6}}, 0, 0));
  struct Case {
    CalibrateRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({{}, "expected points (--published TABLE or --db RESULTS.DB), found none"});
  CalibrateRequest bad_selector;
  bad_selector.published = {table};
  bad_selector.holdout = "colour=red";
  cases.push_back({bad_selector, "--holdout: expected key=value[,key=value], found 'colour=red'"});
  CalibrateRequest no_profile;
  no_profile.published = {table};
  no_profile.fit = {"cpu.step_us"};
  cases.push_back({no_profile, "expected --engine-profile"});
  CalibrateRequest bad_bounds = no_profile;
  bad_bounds.engine_profile = "vllm-0.12";
  bad_bounds.fit = {"cpu.step_us:50:10"};
  cases.push_back({bad_bounds, "calibrate --fit: expected min < max in 'cpu.step_us:50:10'"});
  CalibrateRequest other_engine = bad_bounds;
  other_engine.engine_profile = "sglang-0.5.20";
  other_engine.fit = {"cpu.step_us"};
  cases.push_back({other_engine, "no point to fit sglang-0.5.20 to (its engine is sglang"});
  for (const auto& c : cases) {
    CalibrationReport report;
    const Status s = Calibrate(c.request, &report);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message << ": " << s.message();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
  CalibrateRequest unknown;
  unknown.published = {table};
  unknown.engine_profile = "vllm-0.12";
  unknown.fit = {"cpu.no_such_us"};
  CalibrationReport report;
  const Status s = Calibrate(unknown, &report);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cpu.no_such_us"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace servesweep::calibration
