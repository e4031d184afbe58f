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

// SGLang's DP attention is one instance of tp GPUs with dp attention groups, not dp replicas
// of tp GPUs (it was simulated as eight TP 8 replicas: 64 GPUs' bandwidth, reported as 8).
TEST(RunDeployment, DpAttentionIsOneInstanceOfTpGpus) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  auto layout = spec.initLayout();
  layout.setTp(8);
  layout.setDp(8);
  layout.setDpAttention(true);
  layout.setExpertParallel(true);
  auto d = DeploymentFor(spec.asReader());
  EXPECT_EQ(d.dp, 1);
  EXPECT_EQ(d.dp_attention, 8);
  EXPECT_EQ(d.tp, 8);
  EXPECT_EQ(d.ep, 8);  // the experts over the instance's 8 GPUs
  layout.setDpAttention(false);
  d = DeploymentFor(spec.asReader());
  EXPECT_EQ(d.dp, 8);
  EXPECT_EQ(d.dp_attention, 1);
  EXPECT_EQ(d.ep, 64);
}

// The engine's defaults fill what engine_config leaves unset; what it sets reaches the model:
// gpu_memory_fraction, the chunked-prefill toggle and budget (both were ignored), max_num_seqs,
// and vLLM's multi-step flag.
TEST(RunDeployment, EngineConfigAndEngineDefaultsReachTheModel) {
  EngineProfile sglang;
  ASSERT_TRUE(LoadEngineProfile("sglang-0.3", &sglang).ok());
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.initLayout().setTp(4);
  auto d = DeploymentFor(spec.asReader(), sglang);
  EXPECT_DOUBLE_EQ(d.gpu_memory_utilization, sglang.defaults.gpu_memory_utilization);
  EXPECT_EQ(d.mixed_batches, sglang.defaults.mixed_batches);
  EXPECT_EQ(d.api_servers, 1);
  EXPECT_EQ(d.engine.name, "sglang-0.3");
  auto config = spec.initEngineConfig();
  config.setGpuMemoryFraction(0.45);
  config.setChunkedPrefillTok(2048);
  config.setChunkedPrefill(schema::EngineConfig::Toggle::OFF);
  config.setMaxNumSeqs(32);
  config.setContextLenTok(4096);
  config.setApiServerCount(4);
  auto flags = spec.initEngineFlags(2);
  flags.set(0, "--num-scheduler-steps");
  flags.set(1, "10");
  d = DeploymentFor(spec.asReader(), sglang);
  EXPECT_DOUBLE_EQ(d.gpu_memory_utilization, 0.45);
  EXPECT_EQ(d.prefill_chunk_tok, 2048);
  EXPECT_FALSE(d.chunked_prefill);
  EXPECT_EQ(d.max_num_seqs, 32);
  EXPECT_EQ(d.decode_steps, 10);
  EXPECT_EQ(d.api_servers, 4);
  EXPECT_EQ(d.kv_capacity_limit_tok, 0);  // -c is llama.cpp's
  spec.setEngine("llamacpp");
  EXPECT_EQ(DeploymentFor(spec.asReader(), sglang).kv_capacity_limit_tok, 4096);
}

// The run's engine and version choose its profile.
TEST(RunDeployment, EngineProfileFollowsEngineAndVersion) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setEngine("sglang");
  spec.setEngineVersion("0.3.0");
  EngineProfile p;
  std::string why;
  ASSERT_TRUE(EngineProfileFor(spec.asReader(), &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.3");
  spec.setEngineVersion("0.5.3.post3");
  ASSERT_TRUE(EngineProfileFor(spec.asReader(), &p, &why).ok());
  EXPECT_EQ(p.name, "sglang-0.4");
  spec.setEngine("vllm");
  spec.setEngineVersion("0.6.0");
  ASSERT_TRUE(EngineProfileFor(spec.asReader(), &p, &why).ok());
  EXPECT_EQ(p.name, "vllm-0.6");
}

}  // namespace
}  // namespace servesweep::perfmodel
