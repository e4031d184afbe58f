// Placement feasibility (matrix/feasibility.h): GPUs a layout occupies and whether agents of
// given sizes could ever hold a run.
#include "matrix/feasibility.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

namespace servesweep::matrix {
namespace {

schema::RunSpec::Builder Spec(capnp::MallocMessageBuilder& message, uint32_t tp,
                              uint32_t prefill = 0, uint32_t decode = 0) {
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setEngine("sim");
  auto layout = spec.initLayout();
  layout.setTp(tp);
  layout.setPp(1);
  layout.setDp(1);
  layout.setPrefillInstances(prefill);
  layout.setDecodeInstances(decode);
  spec.setGpusNeeded(GpusForLayout(layout.asReader()));
  return spec;
}

TEST(Feasibility, GpusForLayoutCountsReplicasInstancesAndDpAttention) {
  capnp::MallocMessageBuilder message;
  auto layout = message.initRoot<schema::Layout>();
  layout.setTp(4);
  layout.setPp(2);
  layout.setDp(2);
  EXPECT_EQ(GpusForLayout(layout.asReader()), 16u);
  layout.setDpAttention(true);  // the dp groups split the instance's own tp GPUs
  EXPECT_EQ(GpusForLayout(layout.asReader()), 8u);
  layout.setDpAttention(false);
  layout.setPrefillInstances(1);
  layout.setDecodeInstances(3);  // dp is ignored when disaggregated
  EXPECT_EQ(GpusForLayout(layout.asReader()), 32u);
}

TEST(Feasibility, ARunSpansEqualAgentsOrNotAtAll) {
  capnp::MallocMessageBuilder message;
  auto spec = Spec(message, 16);
  EXPECT_FALSE(CouldEverPlace(spec.asReader(), {8}));
  EXPECT_TRUE(CouldEverPlace(spec.asReader(), {8, 8}));
  EXPECT_FALSE(CouldEverPlace(spec.asReader(), {8, 4, 4}));  // one group is one GPU count
  spec.getLayout().setGpusPerNode(4);
  EXPECT_EQ(AgentsNeeded(spec.asReader(), 16, 8), 4u);
  EXPECT_EQ(AgentsNeeded(spec.asReader(), 16, 2), 0u);  // 4 per node do not fit on 2-GPU agents
}

TEST(Feasibility, DisaggregatedRunsNeedBothPoolsAnyOtherRunEither) {
  capnp::MallocMessageBuilder pd_message, plain_message;
  EXPECT_TRUE(CouldEverPlaceInPools(Spec(pd_message, 8, 1, 2).asReader(), {8}, {8, 8}));
  EXPECT_FALSE(CouldEverPlaceInPools(Spec(pd_message, 8, 2, 2).asReader(), {8}, {8, 8}));
  EXPECT_TRUE(CouldEverPlaceInPools(Spec(plain_message, 16).asReader(), {8}, {8, 8}));
  EXPECT_FALSE(CouldEverPlaceInPools(Spec(plain_message, 16).asReader(), {8}, {8}));
}

}  // namespace
}  // namespace servesweep::matrix
