// Length distributions: their moments, bounds and reproducibility, and their expansion into the
// plan of a run.
#include "workload/length_distribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "workload/trace_reader.h"

namespace servesweep::workload {
namespace {

double Mean(const std::vector<uint32_t>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

TEST(LengthDistribution, MomentsBoundsAndSeeds) {
  const auto uniform = SampleLengths({"uniform", 64, 512, 1, 100000, {}, ""}, 20000, 1);
  EXPECT_EQ(*std::min_element(uniform.begin(), uniform.end()), 64u);
  EXPECT_EQ(*std::max_element(uniform.begin(), uniform.end()), 512u);
  EXPECT_NEAR(Mean(uniform), 288, 288 * 0.02);

  const auto normal = SampleLengths({"normal", 1000, 100, 1, 100000, {}, ""}, 20000, 2);
  const double mean = Mean(normal);
  double var = 0;
  for (uint32_t x : normal) var += (x - mean) * (x - mean);
  EXPECT_NEAR(mean, 1000, 5);
  EXPECT_NEAR(std::sqrt(var / normal.size()), 100, 5);

  auto lognormal = SampleLengths({"lognormal", 300, 0.5, 1, 100000, {}, ""}, 20001, 3);
  std::nth_element(lognormal.begin(), lognormal.begin() + 10000, lognormal.end());
  EXPECT_NEAR(lognormal[10000], 300, 15);  // the median

  const auto clamped = SampleLengths({"normal", 10, 100, 5, 20, {}, ""}, 1000, 4);
  EXPECT_EQ(*std::min_element(clamped.begin(), clamped.end()), 5u);
  EXPECT_EQ(*std::max_element(clamped.begin(), clamped.end()), 20u);
  EXPECT_EQ(SampleLengths({"normal", 500, 50, 1, 1000, {}, ""}, 50, 9),
            SampleLengths({"normal", 500, 50, 1, 1000, {}, ""}, 50, 9));
  EXPECT_EQ(Describe({"uniform", 64, 512, 1, 10, {}, ""}), "uniform:64-512");
}

TEST(LengthDistribution, EmpiricalDrawsTheTracesOwnLengths) {
  // Observations 1, 10, 100 (and 1000 twice): draws are only ever those, in about their shares.
  const auto draws =
      SampleLengths({"empirical", 0, 0, 1, 1048576, {1, 10, 100, 1000, 1000}, "t"}, 20000, 9);
  std::map<uint32_t, int> counts;
  for (uint32_t x : draws) ++counts[x];
  ASSERT_EQ(counts.size(), 4u);
  EXPECT_NEAR(counts[1000] / 20000.0, 0.4, 0.02);
  EXPECT_NEAR(counts[1] / 20000.0, 0.2, 0.02);
  EXPECT_EQ(draws, SampleLengths({"empirical", 0, 0, 1, 1048576, {1, 10, 100, 1000, 1000}, "t"},
                                 20000, 9));
  // Clamped like the others.
  for (uint32_t x : SampleLengths({"empirical", 0, 0, 5, 500, {1, 1000}, "t"}, 100, 1)) {
    EXPECT_TRUE(x == 5 || x == 500) << x;
  }
  EXPECT_EQ(Describe({"empirical", 0, 0, 1, 1, {3, 4}, "azure.csv"}), "empirical:azure.csv(n=2)");
}

}  // namespace
}  // namespace servesweep::workload
