// The fitting machinery of `servesweep calibrate` (perfmodel/calibration.h).
#include "perfmodel/calibration.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::perfmodel {
namespace {

// A model with two coefficients and figures made from known values: the fit finds them.
TEST(Calibration, FitRecoversKnownCoefficients) {
  const double a_true = 350, b_true = 12;
  auto figures = [](double a, double b) {
    std::vector<double> out;
    for (double batch : {1.0, 4.0, 16.0, 64.0}) out.push_back(a + b * batch);
    return out;
  };
  const std::vector<double> measured = figures(a_true, b_true);
  const FitResult fit = FitCoefficients({{"a", 100, 1, 10000}, {"b", 1, 0.01, 1000}},
                                        [&](const std::vector<double>& v) {
                                          return MeanSquaredLogError(figures(v[0], v[1]), measured);
                                        },
                                        {.max_evaluations = 2000, .tolerance = 1e-14});
  ASSERT_EQ(fit.values.size(), 2u);
  EXPECT_NEAR(fit.values[0], a_true, a_true * 1e-3);
  EXPECT_NEAR(fit.values[1], b_true, b_true * 1e-3);
  EXPECT_LT(fit.objective, 1e-8);
}

TEST(Calibration, BoundsHold) {
  const FitResult fit = FitCoefficients(
      {{"a", 0.5, 0.1, 0.9}}, [](const std::vector<double>& v) { return (v[0] - 5) * (v[0] - 5); });
  EXPECT_LE(fit.values[0], 0.9);
  EXPECT_GT(fit.values[0], 0.85);
}

TEST(Calibration, ErrorsAndMedians) {
  EXPECT_DOUBLE_EQ(RelativeError(120, 100), 0.2);
  EXPECT_TRUE(std::isnan(RelativeError(0, 100)));
  EXPECT_DOUBLE_EQ(MedianAbs({-0.3, 0.1, 0.2}), 0.2);
  EXPECT_DOUBLE_EQ(MedianAbs({-0.3, 0.1, 0.2, std::nan(""), 0.5}), 0.25);
  // Log error: 2x too slow weighs as 2x too fast; a missing prediction as a factor of 10.
  EXPECT_NEAR(MeanSquaredLogError({200}, {100}), MeanSquaredLogError({50}, {100}), 1e-12);
  EXPECT_NEAR(MeanSquaredLogError({0}, {100}), std::log(10.0) * std::log(10.0), 1e-12);
  // The absolute form: |log 2| for a factor of 2 either way, averaged, not squared.
  EXPECT_NEAR(MeanAbsoluteLogError({200, 50}, {100, 100}), std::log(2.0), 1e-12);
  EXPECT_NEAR(MeanAbsoluteLogError({100, 400}, {100, 100}), std::log(4.0) / 2, 1e-12);
  EXPECT_NEAR(MeanAbsoluteLogError({0}, {100}), std::log(10.0), 1e-12);
}

TEST(Calibration, RangeSaysWhatIsOutside) {
  Calibration c;
  c.fitted = true;
  RunShape a{"llama-3.1-70b", "h100", "tp4", 200, 180, 12};
  RunShape b{"llama-3.1-70b", "h100", "tp4", 220, 190, 30};
  ExtendRange(a, &c.range);
  ExtendRange(b, &c.range);
  std::string why;
  EXPECT_TRUE(InCalibratedRange(c, {"llama-3.1-70b", "h100", "tp4", 210, 185, 20}, &why)) << why;
  EXPECT_FALSE(InCalibratedRange(c, {"llama-3.1-8b", "h100", "tp4", 210, 185, 64}, &why));
  EXPECT_NE(why.find("model llama-3.1-8b not fitted (fitted: llama-3.1-70b)"), std::string::npos)
      << why;
  EXPECT_NE(why.find("load 64 above the fitted 30"), std::string::npos) << why;
  EXPECT_EQ(LayoutName(8, 1, 8, 8, true, 0, 0), "tp8 dp8 dp-attention ep8");
  EXPECT_EQ(LayoutName(2, 1, 1, 1, false, 1, 3), "1p+3d tp2");
}

// A run is of the farthest kind it qualifies for: the hardware before the model, the model's
// architecture kind (dense GQA Llama 8B next to a fitted dense GQA 70B; MoE Qwen3-30B-A3B or
// MLA DeepSeek-V3 next to none) before its shape.
TEST(Calibration, ARunIsClassifiedByItsFarthestDistanceFromTheFit) {
  Calibration c;
  c.fitted = true;
  ExtendRange({"llama-3.1-70b", "h100", "tp4", 200, 180, 12}, &c.range);
  ExtendRange({"llama-3.1-70b", "h100", "tp4", 220, 190, 30}, &c.range);
  const auto kind = [&](const RunShape& run) { return ClassifyRun(c, run); };
  EXPECT_EQ(kind({"llama-3.1-70b", "h100", "tp4", 210, 185, 20}), ExtrapolationKind::kInRange);
  EXPECT_EQ(kind({"llama-3.1-70b", "h100", "tp4", 210, 185, 33}), ExtrapolationKind::kInRange);
  EXPECT_EQ(kind({"llama-3.1-70b", "h100", "tp4", 210, 185, 34}), ExtrapolationKind::kOtherShape);
  EXPECT_EQ(kind({"llama-3.1-70b", "h100", "tp8", 210, 185, 20}), ExtrapolationKind::kOtherShape);
  EXPECT_EQ(kind({"llama-3.1-8b", "h100", "tp1", 210, 185, 20}), ExtrapolationKind::kOtherModel);
  EXPECT_EQ(kind({"qwen3-30b-a3b", "h100", "tp1", 210, 185, 20}),
            ExtrapolationKind::kOtherArchitecture);
  EXPECT_EQ(kind({"deepseek-v3", "h100", "tp8", 210, 185, 20}),
            ExtrapolationKind::kOtherArchitecture);
  EXPECT_EQ(kind({"no-such-model", "h100", "tp1", 210, 185, 20}),
            ExtrapolationKind::kOtherArchitecture);
  EXPECT_EQ(kind({"llama-3.1-8b", "h200", "tp1", 210, 185, 20}), ExtrapolationKind::kOtherHardware);
  c.fitted = false;
  EXPECT_EQ(kind({"llama-3.1-70b", "h100", "tp4", 210, 185, 20}), ExtrapolationKind::kUncalibrated);
  EXPECT_STREQ(ExtrapolationKindName(ExtrapolationKind::kOtherArchitecture), "other architecture");
}

}  // namespace
}  // namespace servesweep::perfmodel
