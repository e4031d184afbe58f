// Probe arithmetic (nccl-tests' bus-bandwidth factors, size ladders) and the health verdict.
#include <gtest/gtest.h>

#include "kernels/collective_bandwidth.h"
#include "kernels/probe_verdict.h"

namespace servesweep::kernels {
namespace {

TEST(CollectiveBandwidth, BusBandwidthFactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kSendRecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 1), 0.0);
  // 1 GiB all-reduced on 8 ranks in 10 ms: algbw 107.37 GB/s, busbw 187.90 GB/s.
  EXPECT_NEAR(AlgBandwidthGBps(1ull << 30, 0.010), 107.374, 0.001);
  EXPECT_NEAR(BusBandwidthGBps(Collective::kAllReduce, 8, 1ull << 30, 0.010), 187.904, 0.001);
  EXPECT_EQ(AlgBandwidthGBps(1024, 0), 0);
}

TEST(CollectiveBandwidth, SizeLadderIsGeometricAlignedAndInclusive) {
  EXPECT_EQ(SizeLadder(8, 128, 2, 1), (std::vector<uint64_t>{8, 16, 32, 64, 128}));
  // Aligned to 4-byte elements x 8 ranks = 32 bytes: 8 and 16 round to 0 and are dropped.
  EXPECT_EQ(SizeLadder(8, 256, 2, 32), (std::vector<uint64_t>{32, 64, 128, 256}));
  EXPECT_EQ(SizeLadder(1, 100, 10, 1), (std::vector<uint64_t>{1, 10, 100}));
  EXPECT_EQ(SizeLadder(1ull << 62, UINT64_MAX, 4, 1).size(), 1u);  // no overflow
  EXPECT_TRUE(SizeLadder(64, 8, 2, 1).empty());
  EXPECT_TRUE(SizeLadder(8, 64, 1, 1).empty());
}

TEST(ProbeVerdict, MatchesTheLongestModelName) {
  EXPECT_EQ(SpecFor("NVIDIA H200")->hbm_gbps, 4800);
  EXPECT_EQ(SpecFor("NVIDIA H100 80GB HBM3")->hbm_gbps, 3350);
  EXPECT_EQ(SpecFor("NVIDIA H100 PCIe")->hbm_gbps, 2000);
  EXPECT_EQ(SpecFor("NVIDIA GB300")->bf16_dense_tflops, 2500);
  EXPECT_FALSE(SpecFor("NVIDIA T4"));
}

TEST(ProbeVerdict, FlagsBelowSpecAndOutliersAgainstPeers) {
  // Four H200s: GPU 2's HBM is far below the model's achievable 4320 GB/s; GPU 3's GEMM is
  // within spec but 20% below its peers.
  const std::vector<Figure> figures = {
      {"hbm.triad", 0, 4300}, {"hbm.triad", 1, 4310}, {"hbm.triad", 2, 3000},
      {"hbm.triad", 3, 4290}, {"gemm.bf16", 0, 760},  {"gemm.bf16", 1, 755},
      {"gemm.bf16", 2, 762},  {"gemm.bf16", 3, 600},
  };
  const auto verdicts = Judge("NVIDIA H200", figures);
  ASSERT_EQ(verdicts.size(), figures.size());
  EXPECT_NEAR(verdicts[0].expected, 4800 * 0.9, 1e-9);
  EXPECT_EQ(verdicts[0].health, Health::kOk);
  EXPECT_EQ(verdicts[2].health, Health::kBelowSpec);
  EXPECT_NE(verdicts[2].reason.find("hbm.triad on GPU 2: 3000.0, expected at least 3456.0"),
            std::string::npos)
      << verdicts[2].reason;
  EXPECT_EQ(verdicts[7].health, Health::kOutlier);
  EXPECT_NEAR(verdicts[7].of_peers, 600.0 / 757.5, 1e-9);
  EXPECT_FALSE(Healthy(verdicts));
  // An unknown model is judged against its peers only.
  const auto unknown = Judge("Some GPU", {{"hbm.copy", 0, 100}, {"hbm.copy", 1, 100}});
  EXPECT_TRUE(Healthy(unknown));
  EXPECT_EQ(unknown[0].expected, 0);
}

}  // namespace
}  // namespace servesweep::kernels
