// The GPU side of a run's energy (agent/gpu_energy.h): nvidia-smi's counter rows, and which of
// the node's GPUs a run holds (CUDA_VISIBLE_DEVICES, other nodes, prefill and decode apart).
#include "agent/gpu_energy.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::agent {
namespace {

TEST(GpuEnergy, ParsesCounterRowsAndKeepsGpusWithoutOne) {
  record::EnergyCounterRead read;
  ASSERT_TRUE(
      ParseEnergyCounters("0, GPU-aa, 123456789\n1, GPU-bb, [N/A]\n2, GPU-cc, [Not "
                          "Supported]\n\n",
                          &read));
  ASSERT_EQ(read.gpus.size(), 3u);
  EXPECT_EQ(read.gpus[0].index, 0u);
  EXPECT_EQ(read.gpus[0].uuid, "GPU-aa");
  EXPECT_DOUBLE_EQ(read.gpus[0].energy_mj, 123456789);
  EXPECT_TRUE(std::isnan(read.gpus[1].energy_mj));
  EXPECT_TRUE(std::isnan(read.gpus[2].energy_mj));
  // Not such a row (an old driver's complaint about the field): nothing, and why.
  record::EnergyCounterRead bad;
  EXPECT_FALSE(ParseEnergyCounters(
      "Field \"total_energy_consumption\" is not a valid field to query.\n", &bad));
  EXPECT_TRUE(bad.gpus.empty());
  EXPECT_NE(bad.why_none.find("expected 'index, uuid, mJ'"), std::string::npos) << bad.why_none;
}

TEST(GpuEnergy, WithoutNvidiaSmiTheReadSaysWhy) {
  const char* path = std::getenv("PATH");
  const std::string old = path != nullptr ? path : "";
  ::setenv("PATH", "/nonexistent", 1);
  const record::EnergyCounterRead read =
      ReadEnergyCounters(::testing::TempDir() + "/energy-no-smi.csv");
  ::setenv("PATH", old.c_str(), 1);
  EXPECT_TRUE(read.gpus.empty());
  EXPECT_FALSE(read.why_none.empty());
  EXPECT_GE(read.finished_ns, read.started_ns);
}

struct Spec {
  capnp::MallocMessageBuilder message;
  schema::RunSpec::Builder spec = message.initRoot<schema::RunSpec>();
};

TEST(GpuEnergy, TheRunsGpusOnThisNode) {
  Spec s;
  s.spec.setGpusNeeded(2);
  engines::LaunchContext context;
  context.spec = s.spec.asReader();
  record::EnergyInputs in;
  RunGpusOnNode(context, "", &in);
  EXPECT_EQ(in.gpus, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(in.gpus_on_other_nodes, 0u);
  EXPECT_TRUE(in.prefill.empty());
  // The agent's own devices, in the engine's order.
  RunGpusOnNode(context, "3,GPU-x,5", &in);
  EXPECT_EQ(in.gpus, (std::vector<std::string>{"3", "GPU-x"}));
  // 16 GPUs over two nodes: 8 here, 8 not read.
  s.spec.setGpusNeeded(16);
  context.group_size = 2;
  RunGpusOnNode(context, "", &in);
  EXPECT_EQ(in.gpus.size(), 8u);
  EXPECT_EQ(in.gpus_on_other_nodes, 8u);
}

TEST(GpuEnergy, PrefillInstancesComeFirst) {
  Spec s;
  s.spec.setGpusNeeded(4);
  s.spec.getLayout().setPrefillInstances(1);
  s.spec.getLayout().setDecodeInstances(3);
  engines::LaunchContext context;
  context.spec = s.spec.asReader();
  record::EnergyInputs in;
  RunGpusOnNode(context, "", &in);
  EXPECT_EQ(in.prefill, (std::vector<bool>{true, false, false, false}));
}

}  // namespace
}  // namespace servesweep::agent
