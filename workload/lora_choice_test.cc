#include "workload/lora_choice.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::workload {
namespace {

// Pearson's statistic of `counts` against the expected shares `cumulative` gives.
double ChiSquare(const std::vector<uint32_t>& counts, const std::vector<double>& cumulative,
                 uint32_t n) {
  double chi = 0, below = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const double expected = n * (cumulative[k] - below);
    below = cumulative[k];
    chi += (counts[k] - expected) * (counts[k] - expected) / expected;
  }
  return chi;
}

std::vector<uint32_t> Draw(uint64_t seed, uint32_t n, const std::vector<double>& cumulative) {
  std::vector<uint32_t> counts(cumulative.size(), 0);
  for (uint32_t i = 0; i < n; ++i) ++counts.at(PickAdapter(seed, i, cumulative));
  return counts;
}

TEST(LoraChoice, ZipfWeightsFallAsOneOverKToTheSkew) {
  std::vector<double> c;
  ASSERT_TRUE(AdapterCumulativeWeights("zipf", 1.1, 8, &c).ok());
  ASSERT_EQ(c.size(), 8u);
  double h = 0;
  for (int k = 1; k <= 8; ++k) h += std::pow(k, -1.1);
  EXPECT_NEAR(c[0], 1 / h, 1e-12);
  EXPECT_NEAR(c[1] - c[0], std::pow(2, -1.1) / h, 1e-12);
  EXPECT_EQ(c[7], 1.0);
  ASSERT_TRUE(AdapterCumulativeWeights("uniform", 0, 4, &c).ok());
  EXPECT_EQ(c, (std::vector<double>{0.25, 0.5, 0.75, 1.0}));
}

// The draws follow the weights (chi-square at 1%: 18.48 for 7 degrees of freedom, 11.34 for 3),
// and would not follow another skew's.
TEST(LoraChoice, DrawnAdaptersFollowTheWeightsByChiSquare) {
  std::vector<double> zipf, uniform;
  ASSERT_TRUE(AdapterCumulativeWeights("zipf", 1.1, 8, &zipf).ok());
  ASSERT_TRUE(AdapterCumulativeWeights("uniform", 0, 4, &uniform).ok());
  for (uint64_t seed : {0ull, 1ull, 42ull}) {
    EXPECT_LT(ChiSquare(Draw(seed, 4000, zipf), zipf, 4000), 18.48) << seed;
    EXPECT_LT(ChiSquare(Draw(seed, 4000, uniform), uniform, 4000), 11.34) << seed;
  }
  std::vector<double> flatter;
  ASSERT_TRUE(AdapterCumulativeWeights("zipf", 0.5, 8, &flatter).ok());
  EXPECT_GT(ChiSquare(Draw(0, 4000, zipf), flatter, 4000), 18.48);
}

TEST(LoraChoice, TheSameSeedAndIndexPickTheSameAdapter) {
  std::vector<double> c;
  ASSERT_TRUE(AdapterCumulativeWeights("uniform", 0, 8, &c).ok());
  EXPECT_EQ(Draw(7, 500, c), Draw(7, 500, c));
  EXPECT_NE(Draw(7, 500, c), Draw(8, 500, c));
  EXPECT_EQ(PickAdapter(7, 3, {}), -1);  // no adapters: the base model
}

TEST(LoraChoice, BadChoicesAreRefusedSayingWhatIsExpected) {
  std::vector<double> c;
  Status s = AdapterCumulativeWeights("zipfian", 1, 4, &c);
  EXPECT_NE(s.message().find("expected the adapter choice to be uniform, zipf or trace, found "
                             "'zipfian'"),
            std::string::npos);
  s = AdapterCumulativeWeights("zipf", 0, 4, &c);
  EXPECT_NE(s.message().find("Zipf skew to be > 0, found 0"), std::string::npos);
  s = AdapterCumulativeWeights("uniform", 0, 0, &c);
  EXPECT_NE(s.message().find("at least one adapter"), std::string::npos);
}

TEST(LoraChoice, EachEngineNamesTheAdapterItsOwnWay) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setModel("llama-8b");
  auto adapters = spec.getEngineConfig().initLoraAdapters(2);
  adapters[0].setName("sql");
  adapters[1].setName("chat");
  spec.setEngine("vllm");
  auto requests = AdapterRequestsFor(spec.asReader());
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].model, "chat");
  EXPECT_EQ(requests[1].lora_id, -1);
  spec.setEngine("sim");
  EXPECT_EQ(AdapterRequestsFor(spec.asReader())[0].model, "sql");
  spec.setEngine("sglang");
  EXPECT_EQ(AdapterRequestsFor(spec.asReader())[1].model, "llama-8b:chat");
  spec.setEngine("llamacpp");
  requests = AdapterRequestsFor(spec.asReader());
  EXPECT_EQ(requests[1].model, "llama-8b");
  EXPECT_EQ(requests[1].lora_id, 1);
  EXPECT_EQ(requests[1].name, "chat");
}

}  // namespace
}  // namespace servesweep::workload
