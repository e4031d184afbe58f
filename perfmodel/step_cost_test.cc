#include "perfmodel/step_cost.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::perfmodel {
namespace {

// Hand figures used below (not read back from the model):
// Llama 3.1 8B: 8,029,995,008 parameters, embedding (and lm_head) 128256 x 4096 = 525,336,576;
// KV 131,072 B/token (bf16). H100: 3.35 TB/s x 0.85 HBM, 989 TFLOP/s x 0.6 bf16, NVLink busbw
// 450 GB/s x 0.8 with 5 us latency, inter-node 50 GB/s x 0.8 with 10 us.
constexpr double kLlamaParams = 8'029'995'008.0;
constexpr double kLlamaEmbedding = 525'336'576.0;
constexpr double kLlamaKv = 131'072.0;
constexpr double kH100Hbm = 3350e9 * 0.85;
constexpr double kNvlink = 450e9 * 0.8;
constexpr int64_t kOverheadNs = 500'000;

CostModel Make(const std::string& gpu, const std::string& model_name, DeploymentConfig d = {}) {
  HardwareProfile hw;
  ModelProfile model;
  EXPECT_TRUE(LoadHardwareProfile(gpu, &hw).ok());
  EXPECT_TRUE(LoadModelProfile(model_name, &model).ok());
  CostModel cost;
  Status s = CostModel::Create(hw, model, d, &cost);
  EXPECT_TRUE(s.ok()) << s.message();
  return cost;
}

Status TryMake(const std::string& gpu, const std::string& model_name, DeploymentConfig d) {
  HardwareProfile hw;
  ModelProfile model;
  EXPECT_TRUE(LoadHardwareProfile(gpu, &hw).ok());
  EXPECT_TRUE(LoadModelProfile(model_name, &model).ok());
  CostModel cost;
  return CostModel::Create(hw, model, d, &cost);
}

const std::vector<BatchEntry> kOneDecodeAt1000 = {{999, 1, 1}};  // 1000 tokens of KV after

// One request's decode step: memory-bound, so weights (all but the input embedding) plus its
// 1000 tokens of KV over the achievable HBM bandwidth, plus the fixed overhead.
TEST(StepCostTest, SingleDecodeStepIsTheRooflineFormula) {
  const CostModel cost = Make("h100", "llama-3.1-8b");
  const StepCost c = cost.Step(kOneDecodeAt1000);
  const double weights = (kLlamaParams - kLlamaEmbedding) * 2;
  const double kv = 1000 * kLlamaKv;
  EXPECT_DOUBLE_EQ(c.weight_bytes, weights);
  EXPECT_DOUBLE_EQ(c.kv_bytes, kv);
  EXPECT_EQ(c.total_ns, std::llround((weights + kv) / kH100Hbm * 1e9) + kOverheadNs);
  // FLOPs: 2 x non-embedding parameters + attention 4 x 32 heads x 128 x 32 layers x 1000
  // (query, key) pairs + the lm_head for the sampled token.
  const double flops =
      2 * (kLlamaParams - 2 * kLlamaEmbedding) + 4.0 * 32 * 128 * 32 * 1000 + 2 * kLlamaEmbedding;
  EXPECT_DOUBLE_EQ(c.flops, flops);
  EXPECT_DOUBLE_EQ(c.compute_ns, flops / (989e12 * 0.6) * 1e9);
  EXPECT_LT(c.compute_ns, c.memory_ns);
  EXPECT_EQ(c.comm_ns, 0);
}

TEST(StepCostTest, LongPrefillIsComputeBound) {
  const CostModel cost = Make("h100", "llama-3.1-8b");
  const StepCost c = cost.Step({{0, 4096, 1}});
  EXPECT_GT(c.compute_ns, c.memory_ns);
  EXPECT_EQ(c.total_ns, std::llround(c.compute_ns) + kOverheadNs);
}

// TP=2 halves the weights and KV each GPU reads, and adds two all-reduces per layer of one
// token's activations (4096 x 2 bytes), each bytes x 2(n-1)/n / busbw + latency.
TEST(StepCostTest, TensorParallelHalvesMemoryTimeAndAddsAllReduces) {
  const CostModel tp1 = Make("h100", "llama-3.1-8b");
  DeploymentConfig d;
  d.tp = 2;
  const CostModel tp2 = Make("h100", "llama-3.1-8b", d);
  const StepCost c1 = tp1.Step(kOneDecodeAt1000);
  const StepCost c2 = tp2.Step(kOneDecodeAt1000);
  const double all_reduce_ns = 8192.0 * 2 * (2 - 1) / 2 / kNvlink * 1e9 + 5000;
  EXPECT_DOUBLE_EQ(c2.comm_ns, 32 * 2 * all_reduce_ns);
  const double per_gpu = ((kLlamaParams - kLlamaEmbedding) * 2 + 1000 * kLlamaKv) / 2;
  EXPECT_EQ(c2.total_ns,
            std::llround(per_gpu / kH100Hbm * 1e9 + 32 * 2 * all_reduce_ns) + kOverheadNs);
  EXPECT_LT(c2.total_ns, c1.total_ns);
  EXPECT_GT(c2.total_ns, c1.total_ns / 2);  // the all-reduces keep it above half
}

// A tiny model: its weights read in microseconds, so the 2 x layers all-reduces (each with a
// 5 us NVLink latency) cost more than TP saves: TP=2 is slower per step. A large one gains.
TEST(StepCostTest, TensorParallelIsSlowerForATinyModelAndFasterForALargeOne) {
  HardwareProfile hw;
  ASSERT_TRUE(LoadHardwareProfile("h100", &hw).ok());
  ModelProfile tiny;
  const Status parsed = ParseModelProfile(R"(name: tiny-120m
layers: 12
hidden_size: 768
intermediate_size: 3072
vocab_size: 32000
attention: {kind: gqa, heads: 12, kv_heads: 12, head_dim: 64}
)",
                                          "tiny.yaml", &tiny);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  DeploymentConfig tp2;
  tp2.tp = 2;
  CostModel tiny1, tiny2;
  ASSERT_TRUE(CostModel::Create(hw, tiny, {}, &tiny1).ok());
  ASSERT_TRUE(CostModel::Create(hw, tiny, tp2, &tiny2).ok());
  EXPECT_GT(tiny2.Step(kOneDecodeAt1000).total_ns, tiny1.Step(kOneDecodeAt1000).total_ns);
  const CostModel large1 = Make("h100", "llama-3.1-70b", [] {
    DeploymentConfig d;
    d.precision = "fp8";
    return d;
  }());
  const CostModel large2 = Make("h100", "llama-3.1-70b", [] {
    DeploymentConfig d;
    d.precision = "fp8";
    d.tp = 2;
    return d;
  }());
  EXPECT_LT(large2.Step(kOneDecodeAt1000).total_ns, large1.Step(kOneDecodeAt1000).total_ns);
}

// PP=2 with one request: each stage reads half the weights, but the stages run one after the
// other, so the step is no shorter; it gains two activation send/recv hops.
TEST(StepCostTest, PipelineParallelDoesNotShortenASingleDecode) {
  const CostModel pp1 = Make("h100", "llama-3.1-8b");
  DeploymentConfig d;
  d.pp = 2;
  const CostModel pp2 = Make("h100", "llama-3.1-8b", d);
  const double send_recv_ns = 4096.0 * 2 / kNvlink * 1e9 + 5000;
  const StepCost c1 = pp1.Step(kOneDecodeAt1000);
  const StepCost c2 = pp2.Step(kOneDecodeAt1000);
  EXPECT_NEAR(static_cast<double>(c2.total_ns - c1.total_ns), 2 * send_recv_ns, 2);
  // Eight decodes in two micro-batches: three slots, each re-reading half the weights.
  std::vector<BatchEntry> eight(8, BatchEntry{999, 1, 1});
  const StepCost c8 = pp2.Step(eight);
  EXPECT_EQ(c8.microbatches, 2);
  const double stage_ns =
      ((kLlamaParams - kLlamaEmbedding) * 2 / 2 + 4 * 1000 * kLlamaKv / 2) / kH100Hbm * 1e9;
  const double send_recv_4_ns = 4 * 4096.0 * 2 / kNvlink * 1e9 + 5000;  // 4 tokens per hop
  EXPECT_NEAR(static_cast<double>(c8.total_ns),
              3 * (stage_ns + send_recv_4_ns) + static_cast<double>(kOverheadNs), 2);
}

// MoE: a lone decode token reads 8 of Qwen3-30B-A3B's 128 experts per layer; a big batch reads
// nearly all of them.
TEST(StepCostTest, MoeReadsOnlyTheExpertsItsTokensHit) {
  const CostModel cost = Make("h200", "qwen3-30b-a3b");
  const ModelParams& p = cost.params();
  EXPECT_DOUBLE_EQ(cost.DistinctExperts(1), 8);
  EXPECT_NEAR(cost.DistinctExperts(1024), 128, 1e-6);
  const StepCost one = cost.Step({{999, 1, 1}});
  EXPECT_DOUBLE_EQ(one.weight_bytes,
                   ((p.total - p.routed_total - p.embedding) + p.routed_total * 8 / 128) * 2);
  // FLOPs follow the 3.35e9 active parameters, not the 30.5e9 total.
  EXPECT_NEAR(one.flops,
              2 * (3'352'821'760.0 - 2 * 151936.0 * 2048) + 4.0 * 32 * 128 * 48 * 1000 +
                  2 * 151936.0 * 2048,
              1);
  std::vector<BatchEntry> many(256, BatchEntry{999, 1, 1});
  EXPECT_GT(cost.Step(many).weight_bytes, 5 * one.weight_bytes);
}

// EP=2 over two replicas: each GPU stores half the routed experts, and every MoE layer adds an
// all-to-all dispatch and combine of the token's 8 expert copies (2048 x 2 bytes each).
TEST(StepCostTest, ExpertParallelSplitsExpertsAndAddsAllToAll) {
  DeploymentConfig d;
  d.dp = 2;
  const CostModel ep1 = Make("h100", "qwen3-30b-a3b", d);
  d.ep = 2;
  const CostModel ep2 = Make("h100", "qwen3-30b-a3b", d);
  const ModelParams& p = ep1.params();
  EXPECT_DOUBLE_EQ(ep1.weight_bytes_per_gpu(), p.total * 2);
  EXPECT_DOUBLE_EQ(ep2.weight_bytes_per_gpu(), (p.total - p.routed_total) * 2 + p.routed_total);
  EXPECT_GT(ep2.kv_capacity_tok(), ep1.kv_capacity_tok());
  const double all_to_all_ns = 1.0 * 8 * 2048 * 2 * (2 - 1) / 2 / kNvlink * 1e9 + 5000;
  EXPECT_NEAR(ep2.Step({{999, 1, 1}}).comm_ns, 48 * 2 * all_to_all_ns, 1e-6);
  EXPECT_EQ(ep1.Step({{999, 1, 1}}).comm_ns, 0);
}

TEST(StepCostTest, KvCapacityIsTheMemoryLeftAfterWeights) {
  const CostModel cost = Make("h100", "llama-3.1-8b");
  EXPECT_EQ(cost.kv_capacity_tok(),
            static_cast<int64_t>((80e9 * 0.9 - 1e9 - kLlamaParams * 2) / kLlamaKv));
  DeploymentConfig d;
  d.kv_dtype = "fp8";
  EXPECT_EQ(Make("h100", "llama-3.1-8b", d).kv_capacity_tok(),
            static_cast<int64_t>((80e9 * 0.9 - 1e9 - kLlamaParams * 2) / (kLlamaKv / 2)));
  d = {};
  d.tp = 2;  // half the weights and half the KV heads per GPU
  EXPECT_EQ(Make("h100", "llama-3.1-8b", d).kv_capacity_tok(),
            static_cast<int64_t>((80e9 * 0.9 - 1e9 - kLlamaParams) / (kLlamaKv / 2)));
}

TEST(StepCostTest, RefusesLayoutsThatDoNotFitOrMakeNoSense) {
  DeploymentConfig d;
  Status s = TryMake("h100", "llama-3.1-70b", d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("141.1 GB of weights per GPU over tp=1"), std::string::npos)
      << s.message();
  d.tp = 4;
  EXPECT_TRUE(TryMake("h100", "llama-3.1-70b", d).ok());
  d = {};
  d.ep = 2;
  s = TryMake("h100", "llama-3.1-8b", d);
  EXPECT_NE(s.message().find("for dense model llama-3.1-8b"), std::string::npos) << s.message();
  d = {};
  d.spec_num_tok = 2;
  d.spec_mean_accepted_tok = 3;
  EXPECT_FALSE(TryMake("h100", "llama-3.1-8b", d).ok());
  d = {};
  d.prefill_instances = 1;
  EXPECT_FALSE(TryMake("h100", "llama-3.1-8b", d).ok());
  d = {};
  d.precision = "fp8";
  d.kv_dtype = "fp8";
  EXPECT_FALSE(TryMake("h100", "deepseek-v4.1-flash", d).ok());  // its KV is given at fp4
}

TEST(StepCostTest, ColdStartAndKvTransfer) {
  const CostModel cost = Make("h100", "llama-3.1-8b");
  EXPECT_EQ(cost.ColdStartNs(), std::llround(kLlamaParams * 2 / 5e9 * 1e9) + 10'000'000'000);
  // 1000 tokens of KV over one GPU's 400 Gb/s NIC (x 0.8) plus its latency.
  EXPECT_EQ(cost.KvTransferNs(1000), std::llround(1000 * kLlamaKv / (50e9 * 0.8) * 1e9) + 10'000);
  DeploymentConfig d;
  d.tp = 2;
  d.pd_transfer_inter_node = false;  // two GPUs each send half, over NVLink
  EXPECT_EQ(Make("h100", "llama-3.1-8b", d).KvTransferNs(1000),
            std::llround(1000 * kLlamaKv / (2 * kNvlink) * 1e9) + 5'000);
}

}  // namespace
}  // namespace servesweep::perfmodel
