// The performance model's view of a run spec (perfmodel/run_deployment.h): which model profile a
// run gets, and the deployment its layout maps to.
#include "perfmodel/run_deployment.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

namespace servesweep::perfmodel {
namespace {

TEST(RunDeployment, ModelProfileIsNamedOrInferredFromTheModelName) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  std::string name;
  spec.setModel("meta-llama/Llama-3.1-70B-Instruct");
  ASSERT_TRUE(ResolveModelProfileName(spec.asReader(), &name).ok());
  EXPECT_EQ(name, "llama-3.1-70b");
  spec.setModel("Qwen/Qwen3-30B-A3B-Instruct-2507");
  ASSERT_TRUE(ResolveModelProfileName(spec.asReader(), &name).ok());
  EXPECT_EQ(name, "qwen3-30b-a3b");
  spec.getSim().setModelProfile("deepseek-v3");
  ASSERT_TRUE(ResolveModelProfileName(spec.asReader(), &name).ok());
  EXPECT_EQ(name, "deepseek-v3");
  spec.getSim().setModelProfile("");
  spec.setModel("acme/mystery-7b");
  const Status s = ResolveModelProfileName(spec.asReader(), &name);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("for model 'acme/mystery-7b'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("llama-3.1-8b"), std::string::npos) << s.message();
}

TEST(RunDeployment, LayoutMapsToTheModelsDeployment) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  auto layout = spec.initLayout();
  layout.setTp(4);
  layout.setPp(2);
  layout.setDp(2);
  layout.setExpertParallel(true);
  spec.setPrecision("fp8");
  spec.setKvCacheDtype("fp8");
  auto d = DeploymentFor(spec.asReader());
  EXPECT_EQ(d.tp, 4);
  EXPECT_EQ(d.pp, 2);
  EXPECT_EQ(d.dp, 2);
  EXPECT_EQ(d.ep, 8);  // vLLM's expert parallelism spans TP x DP
  EXPECT_EQ(d.precision, "fp8");
  EXPECT_EQ(d.kv_dtype, "fp8");
  layout.setExpertParallel(false);
  layout.setPrefillInstances(1);
  layout.setDecodeInstances(3);
  d = DeploymentFor(spec.asReader());
  EXPECT_EQ(d.ep, 1);
  EXPECT_EQ(d.prefill_instances, 1);
  EXPECT_EQ(d.decode_instances, 3);
}

}  // namespace
}  // namespace servesweep::perfmodel
