// Placement of runs on idle agents: fewest nodes, homogeneous groups, head first, engines.
#include "coordinator/placement.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <memory>

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
  // A disaggregated layout: `prefill` + `decode` instances of tp GPUs each.
  schema::RunSpec::Reader PdSpec(uint32_t prefill, uint32_t decode, uint32_t tp) {
    auto spec = message_->initRoot<schema::RunSpec>();
    spec.setEngine("sim");
    spec.getLayout().setTp(tp);
    spec.getLayout().setPrefillInstances(prefill);
    spec.getLayout().setDecodeInstances(decode);
    spec.setGpusNeeded((prefill + decode) * tp);
    return spec.asReader();
  }
  // Held by pointer: the builder's destructor may throw, a fixture's may not.
  std::unique_ptr<capnp::MallocMessageBuilder> message_ =
      std::make_unique<capnp::MallocMessageBuilder>();
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
}

TEST_F(PlacementTest, HonoursGpusPerNodeAndEngines) {
  AgentEntry a = Agent("a", 8), b = Agent("b", 8);
  auto placed = PlaceRun(Spec(8, 4), {&a, &b});  // 8 GPUs, 4 per node -> 2 nodes
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->size(), 2u);
  AgentEntry no_engine = Agent("x", 8);
  no_engine.engines = {"vllm"};
  EXPECT_FALSE(PlaceRun(Spec(1), {&no_engine}));
}

TEST_F(PlacementTest, DisaggregatedRunsUseThePrefillAndDecodePools) {
  AgentEntry p = Agent("z-prefill", 8), d1 = Agent("a-decode", 8), d2 = Agent("b-decode", 8);
  p.pool = "prefill";
  d1.pool = d2.pool = "decode";
  // 1 prefill instance of tp=8 on the prefill pool (head), 2 decode instances on the decode pool.
  auto placed = PlaceRun(PdSpec(1, 2, 8), {&d2, &p, &d1});
  ASSERT_TRUE(placed);
  EXPECT_EQ(*placed, std::vector<std::string>({"z-prefill", "a-decode", "b-decode"}));
  // Not enough decode GPUs: nothing, even though the prefill node is idle.
  EXPECT_FALSE(PlaceRun(PdSpec(1, 3, 8), {&d2, &p, &d1}));
  // Without pools, a disaggregated run is placed like any other.
  AgentEntry a = Agent("a", 8), b = Agent("b", 8), c = Agent("c", 8);
  placed = PlaceRun(PdSpec(1, 2, 8), {&c, &b, &a});
  ASSERT_TRUE(placed);
  EXPECT_EQ(*placed, std::vector<std::string>({"a", "b", "c"}));
}

}  // namespace
}  // namespace servesweep::coordinator
