// The client's own saturation (agent/loadgen/client_load.h): the delay histogram's percentiles
// and the client-bound verdict's thresholds.
#include "agent/loadgen/client_load.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::loadgen {
namespace {

TEST(DelayHistogram, PercentilesAreReadToWithinABucket) {
  DelayHistogram h;
  EXPECT_TRUE(std::isnan(h.PercentileMs(99)));
  for (int i = 0; i < 99; ++i) h.Add(50'000);  // 50 us
  h.Add(30'000'000);                           // one 30 ms read
  EXPECT_EQ(h.count(), 100u);
  const double p50 = h.PercentileMs(50), p99 = h.PercentileMs(99), p100 = h.PercentileMs(100);
  EXPECT_GE(p50, 0.05);
  EXPECT_LT(p50, 0.05 * 1.13);  // a bucket is 10^(1/20) = 12% wide
  EXPECT_LT(p99, 0.06);         // the 99th of 100 is still a 50 us read
  EXPECT_GE(p100, 30);
  EXPECT_LT(p100, 30 * 1.13);
  DelayHistogram other;
  other.Add(-5);  // a clock step: counted under 100 ns, not lost
  h.Merge(other);
  EXPECT_EQ(h.count(), 101u);
}

TEST(ClientBound, EachThresholdIsAReasonAndAQuietClientHasNone) {
  EXPECT_EQ(ClientBoundReasons(0.3, 10, 0.2, 0.1, 1), "");
  const std::string busy = ClientBoundReasons(0.95, 10, 0.2, 0.1, 2);
  EXPECT_NE(busy.find("the busiest load thread was 95% busy (limit 80%)"), std::string::npos);
  EXPECT_NE(busy.find("client_threads, now 2"), std::string::npos);
  EXPECT_EQ(ClientBoundReasons(0.95, 0.1, 0.2, 0.1, 1), "");  // too short a phase to judge
  EXPECT_NE(ClientBoundReasons(0.1, 10, 25, 0.1, 1).find("reads waited 25.0 ms at p99"),
            std::string::npos);
  EXPECT_NE(ClientBoundReasons(0.1, 10, 0.2, 12, 1).find("sends were 12.0 ms late at p99"),
            std::string::npos);
  EXPECT_EQ(ClientBoundReasons(NAN, 10, NAN, NAN, 1), "");  // nothing measured (a virtual run)
}

}  // namespace
}  // namespace servesweep::loadgen
