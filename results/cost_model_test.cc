// The cost model (results/cost_model.h) on hand-computed figures, and the matrix's
// engine_config.price keys with their errors (file:line:column).
#include "results/cost_model.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <cmath>

#include "matrix/matrix_loader.h"

namespace servesweep::results {
namespace {

CostInputs Measured() {
  CostInputs in;
  in.gpu_count = 4;
  in.duration_s = 90;
  in.completed = 200;
  in.input_tok = 1'000'000;
  in.output_tok = 250'000;
  in.cached_input_tok = 400'000;
  return in;
}

TEST(CostModel, GpuHourPricesTheLayoutOverTheMeasuredWindow) {
  Price price;
  price.gpu_hour = 3.5;
  const Cost cost = CostOf(price, Measured());
  ASSERT_TRUE(cost.priced);
  // 4 GPUs x 90 s = 0.1 GPU-hours x 3.5 = 0.35; 0.35 / 0.25 Mtok = 1.40; 0.35 / 200 = 0.00175.
  EXPECT_NEAR(cost.total, 0.35, 1e-12);
  EXPECT_NEAR(cost.per_mtok_output, 1.40, 1e-12);
  EXPECT_NEAR(cost.per_request, 0.00175, 1e-12);
  EXPECT_EQ(cost.basis, "4 GPU(s) x 90.0 s x 3.5/GPU-hour");
}

TEST(CostModel, TokenPricesChargeCachedInputAtTheCachedPrice) {
  Price price;
  price.input_per_mtok = 0.30;
  price.output_per_mtok = 1.20;
  price.cached_input_per_mtok = 0.03;
  const Cost cost = CostOf(price, Measured());
  ASSERT_TRUE(cost.priced);
  // 0.6 Mtok x 0.30 + 0.4 Mtok x 0.03 + 0.25 Mtok x 1.20 = 0.18 + 0.012 + 0.30 = 0.492.
  EXPECT_NEAR(cost.total, 0.492, 1e-12);
  EXPECT_NEAR(cost.per_mtok_output, 1.968, 1e-12);
  EXPECT_NEAR(cost.per_request, 0.00246, 1e-12);
  EXPECT_NE(cost.basis.find("400000 cached at 0.03/Mtok"), std::string::npos) << cost.basis;
}

TEST(CostModel, UnknownCachedTokensAreChargedAtTheInputPriceAndSaidSo) {
  Price price;
  price.input_per_mtok = 0.30;
  price.output_per_mtok = 1.20;
  price.cached_input_per_mtok = 0.03;
  CostInputs in = Measured();
  in.cached_input_tok = std::nan("");
  const Cost cost = CostOf(price, in);
  // 1 Mtok x 0.30 + 0.25 Mtok x 1.20 = 0.60.
  EXPECT_NEAR(cost.total, 0.60, 1e-12);
  EXPECT_NE(cost.basis.find("cached input tokens not known"), std::string::npos) << cost.basis;
  // Without a cached price the hits do not matter: all input at the input price.
  price.cached_input_per_mtok = 0;
  EXPECT_NEAR(CostOf(price, Measured()).total, 0.60, 1e-12);
}

TEST(CostModel, NoPriceOrNothingMeasuredIsNotPriced) {
  EXPECT_FALSE(CostOf(Price{}, Measured()).priced);
  Price price;
  price.gpu_hour = 2;
  CostInputs in = Measured();
  in.duration_s = std::nan("");
  EXPECT_FALSE(CostOf(price, in).priced);
  in = Measured();
  in.completed = 0;
  in.output_tok = 0;
  const Cost idle = CostOf(price, in);
  ASSERT_TRUE(idle.priced);  // the GPUs cost money even when nothing completed
  EXPECT_TRUE(std::isnan(idle.per_request));
  EXPECT_TRUE(std::isnan(idle.per_mtok_output));
}

const char* kBase = R"(name: t
engine: sim
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3, concurrency: 1}
)";

TEST(CostModel, MatrixPriceKeysReachTheRunSpec) {
  matrix::LoadedMatrix m;
  Status s = matrix::ExpandMatrix(
      "m.yaml",
      std::string(kBase) +
          "engine_config:\n  price: {input_per_mtok: 0.3, output_per_mtok: 1.2, "
          "cached_input_per_mtok: 0.03, currency: USD}\n",
      &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const Price p = PriceOf(m.matrix().getRuns()[0].getEngineConfig());
  EXPECT_DOUBLE_EQ(p.input_per_mtok, 0.3);
  EXPECT_DOUBLE_EQ(p.output_per_mtok, 1.2);
  EXPECT_DOUBLE_EQ(p.cached_input_per_mtok, 0.03);
  EXPECT_EQ(p.currency, "USD");
  matrix::LoadedMatrix m2;
  s = matrix::ExpandMatrix("m.yaml",
                           std::string(kBase) + "engine_config: {price: {gpu_hour: 3.5}}\n", &m2);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_DOUBLE_EQ(PriceOf(m2.matrix().getRuns()[0].getEngineConfig()).gpu_hour, 3.5);
}

TEST(CostModel, MatrixPriceErrorsNamePositionExpectedAndFound) {
  matrix::LoadedMatrix m;
  Status both = matrix::ExpandMatrix(
      "m.yaml",
      std::string(kBase) + "engine_config:\n  price: {gpu_hour: 3.5, output_per_mtok: 1.2}\n", &m);
  EXPECT_NE(both.message().find("m.yaml:6:43: expected either 'gpu_hour' (self-hosted) or token "
                                "prices (a managed API) in 'price', found both"),
            std::string::npos)
      << both.message();
  matrix::LoadedMatrix m2;
  Status negative = matrix::ExpandMatrix(
      "m.yaml", std::string(kBase) + "engine_config:\n  price: {gpu_hour: -1}\n", &m2);
  EXPECT_NE(
      negative.message().find("m.yaml:6:21: expected 'gpu_hour' to be a number >= 0, found '-1'"),
      std::string::npos)
      << negative.message();
  matrix::LoadedMatrix m3;
  Status typo = matrix::ExpandMatrix(
      "m.yaml", std::string(kBase) + "engine_config:\n  price: {gpu_hours: 2}\n", &m3);
  EXPECT_NE(typo.message().find("unknown key 'gpu_hours' in price (did you mean 'gpu_hour'?)"),
            std::string::npos)
      << typo.message();
}

}  // namespace
}  // namespace servesweep::results
