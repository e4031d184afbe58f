// The agent's node probes (agent/node_probes.h): emulated figures are parsed and judged like
// measured ones.
#include "agent/node_probes.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

namespace servesweep::agent {
namespace {

TEST(NodeProbes, EmulatedFiguresParseAndAreJudged) {
  std::vector<kernels::Figure> figures;
  ASSERT_TRUE(ParseEmulatedFigures("hbm.triad=3000,gemm.bf16@1=760.5", &figures).ok());
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[1].probe, "gemm.bf16");
  EXPECT_EQ(figures[1].gpu, 1);
  EXPECT_EQ(figures[1].value, 760.5);
  EXPECT_NE(ParseEmulatedFigures("hbm.triad=fast", &figures)
                .message()
                .find("expected probe[@gpu]=number, found 'hbm.triad=fast'"),
            std::string::npos);
  EXPECT_FALSE(ParseEmulatedFigures("hbm.triad", &figures).ok());

  capnp::MallocMessageBuilder message;
  NodeProbeSettings settings;
  settings.emulated_gpus = 1;
  settings.emulated_gpu_name = "NVIDIA H200";
  settings.emulated_figures = {{"hbm.triad", 0, 3000}};
  auto report = message.initRoot<schema::ProbeReport>();
  RunNodeProbes(settings, report);
  EXPECT_EQ(report.getStatus(), "emulated");
  EXPECT_FALSE(report.getHealthy());
  ASSERT_EQ(report.getResults().size(), 1u);
  EXPECT_EQ(report.getResults()[0].getVerdict(), "below_spec");
}

}  // namespace
}  // namespace servesweep::agent
