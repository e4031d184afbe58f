// Hardware profiles from probe reports: the real H200 report of 2026-11-29 gives the shipped
// h200-measured profile's figures, and the written YAML reads back to the same profile.
#include "perfmodel/probe_profile.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace servesweep::perfmodel {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ProbeProfile, TheH200ReportGivesTheMeasuredFigures) {
  ProbeFigures figures;
  const Status s = ProbeFiguresFromReport(
      ReadFile(SERVESWEEP_SOURCE_DIR "/tests/data/h200-probe-report.json"), &figures);
  ASSERT_TRUE(s.ok()) << s.message();
  // The largest copy buffer (1920 MiB), not triad; GEMMs and host-to-device as measured.
  EXPECT_DOUBLE_EQ(figures.hbm_bytes_per_s, 3958.758e9);
  EXPECT_DOUBLE_EQ(figures.bf16_flops, 792.429e12);
  EXPECT_DOUBLE_EQ(figures.fp8_flops, 1477.203e12);
  EXPECT_DOUBLE_EQ(figures.host_link_bytes_per_s, 55.196e9);

  HardwareProfile base, shipped;
  ASSERT_TRUE(LoadHardwareProfile("h200", &base).ok());
  ASSERT_TRUE(LoadHardwareProfile("h200-measured", &shipped).ok());
  const HardwareProfile hw = HardwareFromProbes(base, figures);
  EXPECT_NEAR(hw.hbm_bytes_per_s, shipped.hbm_bytes_per_s, 1.5e9);  // shipped rounds to 3960
  EXPECT_NEAR(hw.peak_bf16_flops, shipped.peak_bf16_flops, 1e12);
  EXPECT_NEAR(hw.peak_fp8_flops, shipped.peak_fp8_flops, 1e12);
}

TEST(ProbeProfile, WrittenYamlReadsBackToTheSameProfile) {
  HardwareProfile base;
  ASSERT_TRUE(LoadHardwareProfile("h200", &base).ok());
  ProbeFigures figures;
  figures.hbm_bytes_per_s = 4.0e12;
  figures.bf16_flops = 800e12;
  const HardwareProfile hw = HardwareFromProbes(base, figures);
  const std::string yaml = HardwareProfileYaml(hw, "measured here\nby a test");
  EXPECT_EQ(yaml.rfind("# measured here\n# by a test\nname: h200-measured\n", 0), 0u) << yaml;
  HardwareProfile back;
  const Status s = ParseHardwareProfile(yaml, "written.yaml", &back);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(back.name, hw.name);
  EXPECT_EQ(back.gpus_per_node, hw.gpus_per_node);
  EXPECT_DOUBLE_EQ(back.memory_bytes, hw.memory_bytes);
  EXPECT_DOUBLE_EQ(back.hbm_bytes_per_s, hw.hbm_bytes_per_s);
  EXPECT_DOUBLE_EQ(back.peak_bf16_flops, hw.peak_bf16_flops);
  EXPECT_DOUBLE_EQ(back.peak_fp8_flops, hw.peak_fp8_flops);
  EXPECT_DOUBLE_EQ(back.intra_node.busbw_bytes_per_s, hw.intra_node.busbw_bytes_per_s);
  EXPECT_EQ(back.inter_node.latency_ns, hw.inter_node.latency_ns);
  EXPECT_DOUBLE_EQ(back.hbm_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(back.inter_node_efficiency, hw.inter_node_efficiency);
}

TEST(ProbeProfile, ReportsWithoutFiguresAreRefused) {
  ProbeFigures figures;
  Status s = ProbeFiguresFromReport(R"({"status":"no_gpu","figures":[]})", &figures);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "expected measured HBM or GEMM figures in the probe report, found none "
            "(status 'no_gpu')");
  s = ProbeFiguresFromReport("{not json", &figures);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("found invalid JSON"), std::string::npos);
  s = ProbeFiguresFromReport(R"({"devices":[]})", &figures);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("with a 'figures' list"), std::string::npos);
}

}  // namespace
}  // namespace servesweep::perfmodel
