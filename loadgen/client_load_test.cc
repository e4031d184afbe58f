// The client's own saturation (loadgen/client_load.h): the delay histogram's percentiles
// and the client-bound verdict's thresholds.
#include "loadgen/client_load.h"

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

ClientLoadFigures Figures(double busy, double phase_s, double read_lag_ms, double late_ms,
                          double itl_ms = 20, uint32_t threads = 1) {
  return {busy, phase_s, read_lag_ms, late_ms, itl_ms, threads};
}

TEST(ClientBound, EachThresholdIsAReasonAndAQuietClientHasNone) {
  EXPECT_EQ(ClientBoundReasons(Figures(0.3, 10, 0.2, 0.1)), "");
  const std::string busy = ClientBoundReasons(Figures(0.95, 10, 0.2, 0.1, 20, 2));
  EXPECT_NE(busy.find("the busiest load thread was 95% busy (limit 80%)"), std::string::npos);
  EXPECT_NE(busy.find("client_threads, now 2"), std::string::npos);
  EXPECT_EQ(ClientBoundReasons(Figures(0.95, 0.1, 0.2, 0.1)), "");  // too short to judge
  EXPECT_NE(ClientBoundReasons(Figures(0.1, 10, 25, 0.1)).find("reads waited 25.0 ms at p99"),
            std::string::npos);
  EXPECT_NE(ClientBoundReasons(Figures(0.1, 10, 0.2, 12)).find("sends were 12.0 ms late at p99"),
            std::string::npos);
  EXPECT_EQ(ClientBoundReasons(Figures(NAN, 10, NAN, NAN, NAN)), "");  // a virtual run
}

// The advice follows the figures: more threads for a busy thread, a quieter machine when late
// reads or sends came while every load thread was mostly idle, both in between or unmeasured.
TEST(ClientBound, TheAdviceFollowsTheFigures) {
  const std::string busy = ClientBoundReasons(Figures(0.95, 10, 25, 0.1, 20, 1));
  EXPECT_NE(busy.find("more load threads (client_threads, now 1)"), std::string::npos) << busy;
  EXPECT_EQ(busy.find("less busy"), std::string::npos) << busy;
  const std::string idle = ClientBoundReasons(Figures(0.018, 10, 25, 0.1, 20, 1));
  EXPECT_NE(idle.find("the load threads were not busy (the busiest 2%), so the machine was"),
            std::string::npos)
      << idle;
  EXPECT_EQ(idle.find("client_threads"), std::string::npos) << idle;
  const std::string between = ClientBoundReasons(Figures(0.6, 10, 25, 0.1, 20, 2));
  EXPECT_NE(between.find("client_threads, now 2) or on a less busy client machine"),
            std::string::npos)
      << between;
  const std::string unmeasured = ClientBoundReasons(Figures(NAN, 10, 25, 0.1, 20, 1));
  EXPECT_NE(unmeasured.find("or on a less busy client machine"), std::string::npos) << unmeasured;
}

// A read lag costs a figure only when it outlasts the gap to a stream's next chunk.
TEST(ClientBound, TheReadLagLimitIsTheMedianItlAboveAFloor) {
  // 11 ms late reads of 100 ms gaps merged nothing; of 5 ms gaps they did.
  EXPECT_EQ(ClientBoundReasons(Figures(0.1, 10, 11, 0.1, 100)), "");
  EXPECT_NE(ClientBoundReasons(Figures(0.1, 10, 8, 0.1, 5)).find("(limit 5.0 ms, the median ITL"),
            std::string::npos);
  // Below the floor, a busy machine's scheduling noise, not the client: not judged by the ITL.
  EXPECT_EQ(ClientBoundReasons(Figures(0.1, 10, 1.5, 0.1, 0.5)), "");
  EXPECT_NE(ClientBoundReasons(Figures(0.1, 10, 2.5, 0.1, 0.5)).find("(limit 2.0 ms)"),
            std::string::npos);
  // One-chunk outputs (no ITL): the fixed limit.
  EXPECT_EQ(ClientBoundReasons(Figures(0.1, 10, 9, 0.1, NAN)), "");
  EXPECT_NE(ClientBoundReasons(Figures(0.1, 10, 11, 0.1, NAN)).find("(limit 10.0 ms)"),
            std::string::npos);
}

}  // namespace
}  // namespace servesweep::loadgen
