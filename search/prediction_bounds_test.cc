#include "search/prediction_bounds.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::search {
namespace {

perfmodel::KindBand Band(double low_pct, double high_pct, size_t cases = 3) {
  perfmodel::KindBand band;
  band.low_pct = low_pct;
  band.high_pct = high_pct;
  band.cases = cases;
  band.figures = cases * 10;
  return band;
}

const Figures kPredicted = {
    {"ttft_p90_ms", 100}, {"output_throughput_per_gpu", 1000}, {"decode_median_tok_per_s", 50},
    {"goodput", 4},       {"cost_per_mtok_output", 2},         {"success_rate", 1},
    {"gpu_count", 2}};

TEST(PredictionBounds, EachFigureGoesToTheEndOfTheBandThatHelpsOrHurts) {
  // predicted / measured - 1 in [-20%, +25%]: measured in [predicted / 1.25, predicted / 0.8].
  const auto band = Band(-20, 25);
  const Figures best = WithinBand(kPredicted, band, Side::kOptimistic);
  EXPECT_DOUBLE_EQ(best.at("ttft_p90_ms"), 80);
  EXPECT_DOUBLE_EQ(best.at("output_throughput_per_gpu"), 1250);
  EXPECT_DOUBLE_EQ(best.at("decode_median_tok_per_s"), 62.5);
  EXPECT_DOUBLE_EQ(best.at("goodput"), 5);
  EXPECT_DOUBLE_EQ(best.at("cost_per_mtok_output"), 1.6);  // a price over 1250 instead of 1000
  EXPECT_DOUBLE_EQ(best.at("success_rate"), 1);
  EXPECT_DOUBLE_EQ(best.at("gpu_count"), 2);
  const Figures worst = WithinBand(kPredicted, band, Side::kPessimistic);
  EXPECT_DOUBLE_EQ(worst.at("ttft_p90_ms"), 125);
  EXPECT_DOUBLE_EQ(worst.at("output_throughput_per_gpu"), 800);
  EXPECT_DOUBLE_EQ(worst.at("cost_per_mtok_output"), 2.5);
}

// The model prices energy at maximum power: an upper bound. Optimistically a configuration
// might spend nothing more, so energy never prunes; pessimistically it is a cost.
TEST(PredictionBounds, EnergyIsBoundedAboveOnlyAndNeverPrunes) {
  const Figures predicted = {{"energy_per_output_tok_j", 0.4}, {"energy_per_request_j", 80}};
  const auto band = Band(-20, 25);
  const Figures best = WithinBand(predicted, band, Side::kOptimistic);
  EXPECT_DOUBLE_EQ(best.at("energy_per_output_tok_j"), 0);
  EXPECT_DOUBLE_EQ(best.at("energy_per_request_j"), 0);
  const Figures worst = WithinBand(predicted, band, Side::kPessimistic);
  EXPECT_DOUBLE_EQ(worst.at("energy_per_output_tok_j"), 0.5);
  EXPECT_DOUBLE_EQ(worst.at("energy_per_request_j"), 100);
  EXPECT_FALSE(
      CanPrune(Objective::kMinEnergyPerOutputTokJ, true, best.at("energy_per_output_tok_j"), 0.01));
}

TEST(PredictionBounds, AnUnknownBandBoundsNothingAndNeverPrunes) {
  const Figures same = WithinBand(kPredicted, Band(-20, 25, 2), Side::kOptimistic);
  EXPECT_EQ(same, kPredicted);
  EXPECT_FALSE(CanPrune(Objective::kMaxOutputTokPerSPerGpu, false, 10, 1000));
}

TEST(PredictionBounds, TheObservedBandHoldsEightyPercentOfTheErrors) {
  std::vector<double> errors;
  for (int i = 0; i <= 100; ++i) errors.push_back(i - 50.0);  // -50 .. +50 in steps of 1
  const auto band = ObservedBand(errors, 3);
  EXPECT_TRUE(band.known());
  EXPECT_DOUBLE_EQ(band.low_pct, -40);
  EXPECT_DOUBLE_EQ(band.high_pct, 40);
  EXPECT_EQ(band.figures, 101u);
  EXPECT_FALSE(ObservedBand(errors, 2).known());  // too few configurations
  EXPECT_FALSE(ObservedBand({}, 5).known());      // nothing measured
}

TEST(PredictionBounds, PrunesOnlyWhatCannotBeatTheLeader) {
  const auto o = Objective::kMaxOutputTokPerSPerGpu;
  EXPECT_TRUE(CanPrune(o, true, 900, 1000));
  EXPECT_TRUE(CanPrune(o, true, 1000, 1000));  // a tie cannot beat it
  EXPECT_FALSE(CanPrune(o, true, 1001, 1000));
  EXPECT_FALSE(CanPrune(o, true, NAN, 1000));  // no bound (nothing meets in the model): run it
  EXPECT_TRUE(CanPrune(Objective::kMinCostPerMOutputTok, true, 2.5, 2));
  EXPECT_FALSE(CanPrune(Objective::kMinCostPerMOutputTok, true, 1.5, 2));
}

}  // namespace
}  // namespace servesweep::search
