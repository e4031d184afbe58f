#include "calibration/cross_validate.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "calibration/true_profile_for_test.h"
#include "testing/scratch_dir.h"

namespace servesweep::calibration {
namespace {

using perfmodel::ExtrapolationKind;

TEST(BandOf, KnownFromThreeCasesWithNumpysPercentiles) {
  // Ten errors over three cases: numpy.percentile([-.4,-.2,...], [10, 90]).
  const std::vector<double> errors = {-0.4, -0.2, -0.1, 0.0, 0.05, 0.1, 0.1, 0.2, 0.3, 0.9};
  const std::vector<std::string> cases = {"a", "a", "a", "b", "b", "b", "c", "c", "c", "c"};
  const ErrorBand band = BandOf(errors, cases);
  EXPECT_TRUE(band.known());
  EXPECT_EQ(band.cases, 3u);
  EXPECT_EQ(band.figures, 10u);
  EXPECT_NEAR(band.low, -0.22, 1e-12);  // -0.4 + 0.9 x (-0.2 - -0.4)
  EXPECT_NEAR(band.high, 0.36, 1e-12);  // 0.3 + 0.1 x (0.9 - 0.3)
  EXPECT_NEAR(band.median_abs, 0.15, 1e-12);
  // Two cases are too few to say, whatever their figures; NaN figures are not counted.
  const ErrorBand two = BandOf({-0.1, 0.1, NAN}, {"a", "b", "c"});
  EXPECT_FALSE(two.known());
  EXPECT_EQ(two.cases, 2u);
  EXPECT_EQ(two.figures, 2u);
  EXPECT_TRUE(std::isnan(BandOf({}, {}).low));
}

HeldOutFigure Figure(const std::string& case_name, double error, ExtrapolationKind kind) {
  HeldOutFigure f;
  f.case_name = case_name;
  f.error = error;
  f.kind = kind;
  return f;
}

// A case is judged against the band of the other cases of its kind: with four cases, each
// sees a band of three; a case far outside the rest is not covered by theirs.
TEST(SummariseHeldOut, CoverageIsJudgedWithoutTheCaseItself) {
  CrossValidation cv;
  for (const auto& [name, error] : std::vector<std::pair<std::string, double>>{{"a", -0.1},
                                                                               {"a", 0.1},
                                                                               {"b", -0.04},
                                                                               {"b", 0.04},
                                                                               {"c", 0.0},
                                                                               {"c", 0.02},
                                                                               {"far", 1.5},
                                                                               {"far", 1.6}}) {
    cv.figures.push_back(Figure(name, error, ExtrapolationKind::kInRange));
  }
  cv.figures.push_back(Figure("alone", 0.3, ExtrapolationKind::kOtherHardware));
  SummariseHeldOut(&cv);
  const ErrorBand& in_range = cv.bands[static_cast<int>(ExtrapolationKind::kInRange)];
  EXPECT_TRUE(in_range.known());
  EXPECT_EQ(in_range.cases, 4u);
  EXPECT_FALSE(cv.bands[static_cast<int>(ExtrapolationKind::kOtherHardware)].known());
  // 8 in-range figures judged (the lone hardware figure's kind has no other case). a against
  // {b, c, far}: [-0.02, 1.55] holds 0.1, not -0.1; b and c lie inside the others' bands; far
  // against {a, b, c}: [-0.07, 0.07] holds neither of its figures.
  EXPECT_EQ(cv.judged_figures, 8u);
  EXPECT_NEAR(cv.coverage, 5.0 / 8, 1e-12);
  EXPECT_NEAR(cv.median_abs_error, 0.1, 1e-12);
  EXPECT_GT(cv.median_band_width, 0);
}

// Llama 3.1 8B at six concurrencies (1-5 and 8) and Qwen3-8B at two, under vLLM 0.12 on one H100.
constexpr const char* kLlama = R"(name: llama
engine: vllm
engine_version: 0.12.0
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload: {input_len: 40, output_len: 100, num_requests: 24}
local: {agents: 1, gpus_per_agent: 1}
axes:
  concurrency: [1, 2, 3, 4, 5, 8]
)";
constexpr const char* kQwen = R"(name: qwen
engine: vllm
engine_version: 0.12.0
model: Qwen/Qwen3-8B
sim: {hardware: h100}
workload: {input_len: 40, output_len: 100, num_requests: 24}
local: {agents: 1, gpus_per_agent: 1}
axes:
  concurrency: [1, 4]
)";

struct Point {
  std::string matrix;
  int concurrency;
  double ttft_ms, tpot_ms;
};

// One case per point of kLlama ("c1" .. "c5", "c8") and one of kQwen's two points ("qwen").
std::string Table(const std::vector<Point>& points) {
  std::string text = "cases:\n";
  std::string last_case;
  for (const Point& p : points) {
    const std::string name = p.matrix == "qwen.yaml" ? "qwen" : fmt::format("c{}", p.concurrency);
    if (name != last_case) {
      text += fmt::format(
          "  - name: {}\n    source: test-{}\n    conditions: test\n    matrix: {}\n"
          "    points:\n",
          name, name, p.matrix);
    }
    last_case = name;
    text += fmt::format(
        "      - match: {{concurrency: {}}}\n        figures: {{ttft_median_ms: {}, "
        "tpot_median_ms: {}}}\n",
        p.concurrency, p.ttft_ms, p.tpot_ms);
  }
  return text;
}

class CrossValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.WriteFile("llama.yaml", kLlama);
    dir_.WriteFile("qwen.yaml", kQwen);
  }
  // Every point's figures as the model gives them under `profile`.
  std::vector<Point> ModelPoints(const std::string& profile) {
    std::vector<Point> probe;
    for (int c : {1, 2, 3, 4, 5, 8}) probe.push_back({"llama.yaml", c, 1, 1});
    probe.push_back({"qwen.yaml", 1, 1, 1});
    probe.push_back({"qwen.yaml", 4, 1, 1});
    CalibrateRequest r;
    r.published = {dir_.WriteFile("probe.yaml", Table(probe))};
    r.engine_profile = profile;
    CalibrationReport report;
    const Status s = Calibrate(r, &report);
    EXPECT_TRUE(s.ok()) << s.message();
    for (size_t i = 0; i < report.points.size(); ++i) {
      EXPECT_TRUE(report.points[i].prediction.status.ok());
      probe[i].ttft_ms = report.points[i].prediction.figures[0];
      probe[i].tpot_ms = report.points[i].prediction.figures[1];
    }
    return probe;
  }
  testing::ScratchDir dir_{"cross-validate"};
};

// Figures made by the model with a known CPU cost per step, cross-validated from a wrong
// start: every case is refitted without itself and predicted to within the fit's rounding,
// each held-out case is classified by what the others cover (concurrencies 1-5 in range, Qwen3-8B
// at 1 and 4 among the others; 8 another shape, above them; Qwen3-8B another model of the same
// dense GQA kind as Llama).
TEST_F(CrossValidateTest, EachCaseIsPredictedByAFitThatNeverSawIt) {
  double true_step_us = 0;
  const std::string truth_path = WriteTrueProfile(dir_, &true_step_us);
  const std::vector<Point> points = ModelPoints(truth_path);

  CalibrateRequest r;
  r.published = {dir_.WriteFile("table.yaml", Table(points))};
  r.engine_profile = "vllm-0.12";
  r.fit = {"cpu.step_us"};
  CrossValidation cv;
  const Status s = CrossValidate(r, &cv);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cv.fits, 7);
  ASSERT_EQ(cv.cases.size(), 7u);
  ASSERT_EQ(cv.figures.size(), 16u);
  for (const HeldOutCase& c : cv.cases) EXPECT_TRUE(c.refitted) << c.name;
  for (const HeldOutFigure& f : cv.figures) {
    EXPECT_LT(std::fabs(f.error), 0.02) << f.point_id << " " << f.metric;
    const ExtrapolationKind want = f.case_name == "qwen" ? ExtrapolationKind::kOtherModel
                                   : f.case_name == "c8" ? ExtrapolationKind::kOtherShape
                                                         : ExtrapolationKind::kInRange;
    EXPECT_EQ(f.kind, want) << f.point_id << ": " << perfmodel::ExtrapolationKindName(f.kind)
                            << " (" << f.outside << ")";
  }
  EXPECT_TRUE(cv.bands[static_cast<int>(ExtrapolationKind::kInRange)].known());
  EXPECT_FALSE(cv.bands[static_cast<int>(ExtrapolationKind::kOtherModel)].known());
  EXPECT_EQ(cv.judged_figures, 10u);  // c1..c5, each against the four others
}

// One case the model cannot explain (its figures twice the model's) shows its error when held
// out; the fit on everything would have bent towards it and hidden part of it.
TEST_F(CrossValidateTest, ACaseTheModelCannotExplainShowsItsErrorHeldOut) {
  std::vector<Point> points = ModelPoints("vllm-0.12");
  for (Point& p : points) {
    if (p.matrix == "llama.yaml" && p.concurrency == 3) {
      p.ttft_ms *= 2;
      p.tpot_ms *= 2;
    }
  }
  CalibrateRequest r;
  r.published = {dir_.WriteFile("table.yaml", Table(points))};
  r.engine_profile = "vllm-0.12";
  r.fit = {"cpu.step_us"};
  CrossValidation cv;
  ASSERT_TRUE(CrossValidate(r, &cv).ok());
  for (const HeldOutCase& c : cv.cases) {
    if (c.name == "c3") {
      EXPECT_GT(c.median_abs_error, 0.4) << c.name;
    } else {
      EXPECT_LT(c.median_abs_error, 0.2) << c.name;
    }
  }
  // The same table fitted on everything: c3's own error is smaller than its held-out one.
  CalibrationReport all;
  ASSERT_TRUE(Calibrate(r, &all).ok());
  for (const CaseReport& c : all.cases) {
    if (c.published->name != "c3") continue;
    for (const HeldOutCase& held : cv.cases) {
      if (held.name == "c3") {
        EXPECT_LT(c.median_abs_error, held.median_abs_error);
      }
    }
  }
}

// A case that also holds another engine's points: only the profile's own are held out and
// counted (the others were predicted by their own, possibly fitted, profile).
TEST_F(CrossValidateTest, OnlyTheProfilesOwnPointsOfACaseAreCounted) {
  dir_.WriteFile("mixed.yaml", R"(name: mixed
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload: {input_len: 40, output_len: 100, num_requests: 24, concurrency: 2}
local: {agents: 1, gpus_per_agent: 1}
zip:
  - engine: [vllm, sglang]
    engine_version: ["0.12.0", "0.5.3"]
)");
  std::string table = Table(ModelPoints("vllm-0.12"));
  table +=
      "  - name: mixed\n    source: test-mixed\n    conditions: test\n    matrix: mixed.yaml\n"
      "    points:\n"
      "      - match: {engine: vllm}\n        figures: {ttft_median_ms: 20, tpot_median_ms: 7}\n"
      "      - match: {engine: sglang}\n        figures: {ttft_median_ms: 20, tpot_median_ms: 7}\n";
  CalibrateRequest r;
  r.published = {dir_.WriteFile("table.yaml", table)};
  r.engine_profile = "vllm-0.12";
  r.fit = {"cpu.step_us"};
  CrossValidation cv;
  ASSERT_TRUE(CrossValidate(r, &cv).ok());
  ASSERT_EQ(cv.cases.size(), 8u);
  EXPECT_EQ(cv.cases.back().name, "mixed");
  EXPECT_EQ(cv.cases.back().figures, 2u);
  for (const HeldOutFigure& f : cv.figures) {
    EXPECT_EQ(f.point_id.find("sglang"), std::string::npos) << f.point_id;
  }
}

// A case alone leaves nothing to fit: an unfitted start profile predicts it out of sample
// (uncalibrated); a fitted one may have been fitted on it, so the case gives no figure.
TEST_F(CrossValidateTest, OneCaseAloneIsUncalibratedOrNotCrossValidated) {
  std::vector<Point> points = ModelPoints("vllm-0.12");
  points.resize(1);
  perfmodel::EngineProfile unfitted;
  ASSERT_TRUE(perfmodel::LoadEngineProfile("vllm-0.12", &unfitted).ok());
  unfitted.calibration = {};
  const std::string unfitted_path = dir_.Path("unfitted.yaml");
  std::ofstream(unfitted_path) << perfmodel::EngineProfileYaml(unfitted, "");
  CalibrateRequest r;
  r.published = {dir_.WriteFile("table.yaml", Table(points))};
  r.engine_profile = unfitted_path;
  r.fit = {"cpu.step_us"};
  CrossValidation cv;
  ASSERT_TRUE(CrossValidate(r, &cv).ok());
  EXPECT_EQ(cv.fits, 0);
  ASSERT_EQ(cv.cases.size(), 1u);
  EXPECT_FALSE(cv.cases[0].refitted);
  EXPECT_EQ(cv.cases[0].not_cross_validated, "");
  ASSERT_EQ(cv.figures.size(), 2u);
  for (const HeldOutFigure& f : cv.figures) EXPECT_EQ(f.kind, ExtrapolationKind::kUncalibrated);

  r.engine_profile = "vllm-0.12";  // shipped: fitted
  ASSERT_TRUE(CrossValidate(r, &cv).ok());
  ASSERT_EQ(cv.cases.size(), 1u);
  EXPECT_NE(cv.cases[0].not_cross_validated.find("a prediction would be in-sample"),
            std::string::npos);
  EXPECT_TRUE(cv.figures.empty());
  EXPECT_TRUE(std::isnan(cv.median_abs_error));
}

TEST_F(CrossValidateTest, WrongInputsAreRefusedWithWhatWasExpected) {
  const std::string table = dir_.WriteFile("t.yaml", Table({{"llama.yaml", 1, 10, 5}}));
  CalibrateRequest no_fit;
  no_fit.published = {table};
  no_fit.engine_profile = "vllm-0.12";
  CrossValidation cv;
  Status s = CrossValidate(no_fit, &cv);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expected --engine-profile and --fit"), std::string::npos)
      << s.message();
  CalibrateRequest other_engine = no_fit;
  other_engine.engine_profile = "sglang-0.5.20";
  other_engine.fit = {"cpu.step_us"};
  s = CrossValidate(other_engine, &cv);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expected cases with points sglang-0.5.20 fits, found none"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace servesweep::calibration
