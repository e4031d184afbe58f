#include "common/sort_doubles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

namespace servesweep {
namespace {

// The bits of each value, so that -0 / +0 and NaNs are compared exactly.
std::vector<uint64_t> Bits(const std::vector<double>& v) {
  std::vector<uint64_t> out;
  for (double x : v) out.push_back(std::bit_cast<uint64_t>(x));
  return out;
}

TEST(SortDoubles, SameOrderAsStdSortAtEverySizeAroundTheRadixThreshold) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> itl_s(-4, 1.5);  // ITL-like: 1 ms .. seconds
  std::uniform_real_distribution<double> any(-1e6, 1e6);
  for (size_t n : {0, 1, 2, 17, 1023, 1024, 1025, 5000, 40000}) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<double> v(n);
      for (double& x : v) {
        x = kind == 0 ? itl_s(rng) : kind == 1 ? any(rng) : std::floor(any(rng) / 1e5);
      }
      std::vector<double> expected = v;
      std::sort(expected.begin(), expected.end());
      SortDoubles(&v);
      ASSERT_EQ(Bits(v), Bits(expected)) << "n " << n << " kind " << kind;
    }
  }
}

TEST(SortDoubles, InfinitiesDenormalsAndSignedZerosInTheirPlace) {
  const double inf = std::numeric_limits<double>::infinity();
  const double tiny = std::numeric_limits<double>::denorm_min();
  std::vector<double> v;
  for (int i = 0; i < 600; ++i) {
    for (double x : {inf, -inf, tiny, -tiny, 0.0, -0.0, 1.0, -1.0, 1e308, -1e308}) v.push_back(x);
  }
  SortDoubles(&v);
  ASSERT_TRUE(std::is_sorted(v.begin(), v.end()));
  EXPECT_EQ(v.front(), -inf);
  EXPECT_EQ(v.back(), inf);
  // Radix order puts -0 before +0 (equal under operator<, so std::sort's order is either).
  const auto zero = std::find(v.begin(), v.end(), 0.0);
  EXPECT_TRUE(std::signbit(*zero));
  EXPECT_FALSE(std::signbit(*(zero + 1199)));
}

TEST(SortDoubles, NaNsGoToTheEndsInsteadOfAnywhere) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v;
  for (int i = 0; i < 2000; ++i) v.push_back(i % 100 == 0 ? (i % 200 == 0 ? nan : -nan) : i);
  SortDoubles(&v);
  EXPECT_TRUE(std::isnan(v.front()) && std::signbit(v.front()));
  EXPECT_TRUE(std::isnan(v.back()) && !std::signbit(v.back()));
  const auto numbers = std::count_if(v.begin(), v.end(), [](double x) { return !std::isnan(x); });
  EXPECT_EQ(numbers, 1980);
  EXPECT_TRUE(std::is_sorted(v.begin() + 10, v.begin() + 1990));
}

}  // namespace
}  // namespace servesweep
