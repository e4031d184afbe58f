// Placement of runs on idle agents: fewest nodes, homogeneous groups, head first, engines.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include <memory>

#include "coordinator/placement.h"

namespace servesweep::coordinator {
namespace {

AgentEntry Agent(const std::string& id, uint32_t gpus) {
  AgentEntry a;
  a.id = id;
  a.gpus = gpus;
  a.engines = {"sim"};
  return a;
}

class PlacementTest : public ::testing::Test {
 protected:
  schema::RunSpec::Reader Spec(uint32_t gpus, uint32_t gpus_per_node = 0) {
    auto spec = message_->initRoot<schema::RunSpec>();
    spec.setEngine("sim");
    spec.setGpusNeeded(gpus);
    spec.getLayout().setGpusPerNode(gpus_per_node);
    return spec.asReader();
  }
  // Held by pointer: the builder's destructor may throw, a fixture's may not.
  std::unique_ptr<capnp::MallocMessageBuilder> message_ = std::make_unique<capnp::MallocMessageBuilder>();
};

TEST_F(PlacementTest, OneAgentWhenItHasEnoughGpus) {
  AgentEntry a = Agent("a", 8), b = Agent("b", 8);
  auto placed = PlaceRun(Spec(4), {&b, &a});
  ASSERT_TRUE(placed);
  EXPECT_EQ(*placed, std::vector<std::string>({"a"}));
}

TEST_F(PlacementTest, SpansNodesOfEqualSizeHeadFirst) {
  AgentEntry a = Agent("a", 8), b = Agent("b", 8), c = Agent("c", 8), small = Agent("s", 4);
  auto placed = PlaceRun(Spec(16), {&c, &small, &b, &a});
  ASSERT_TRUE(placed);
  EXPECT_EQ(*placed, std::vector<std::string>({"a", "b"}));
}

TEST_F(PlacementTest, NothingWhenTooFewIdleAgents) {
  AgentEntry a = Agent("a", 8);
  EXPECT_FALSE(PlaceRun(Spec(16), {&a}));
  EXPECT_FALSE(CouldEverPlace(Spec(16), {8}));
  EXPECT_TRUE(CouldEverPlace(Spec(16), {8, 8}));
}

TEST_F(PlacementTest, HonoursGpusPerNodeAndEngines) {
  AgentEntry a = Agent("a", 8), b = Agent("b", 8);
  auto placed = PlaceRun(Spec(8, 4), {&a, &b});   // 8 GPUs, 4 per node -> 2 nodes
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->size(), 2u);
  AgentEntry no_engine = Agent("x", 8);
  no_engine.engines = {"vllm"};
  EXPECT_FALSE(PlaceRun(Spec(1), {&no_engine}));
}

}  // namespace
}  // namespace servesweep::coordinator
