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
constexpr int64_t kOverheadNs = 0;  // the bare roofline's engine profile has no CPU time

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
  // The bare roofline captures no graphs: the weights at the default 5 GB/s alone.
  const CostModel cost = Make("h100", "llama-3.1-8b");
  EXPECT_EQ(cost.ColdStartNs(), std::llround(kLlamaParams * 2 / 5e9 * 1e9));
  {
    // The engine's startup: init, its weight stream, graphs only when it captures them.
    DeploymentConfig d;
    d.engine.coefficients.startup_init_s = 30;
    d.engine.coefficients.weight_load_gb_per_s = 2;
    d.engine.coefficients.graph_capture_s = 20;
    EXPECT_EQ(Make("h100", "llama-3.1-8b", d).ColdStartNs(),
              std::llround((30 + kLlamaParams * 2 / 2e9) * 1e9));
    d.engine.coefficients.cuda_graph_max_tok = 512;
    EXPECT_EQ(Make("h100", "llama-3.1-8b", d).ColdStartNs(),
              std::llround((30 + kLlamaParams * 2 / 2e9 + 20) * 1e9));
    d.tp = 2;  // each GPU reads its own half
    EXPECT_EQ(Make("h100", "llama-3.1-8b", d).ColdStartNs(),
              std::llround((30 + kLlamaParams * 2 / 2 / 2e9 + 20) * 1e9));
  }
  // 1000 tokens of KV over one GPU's 400 Gb/s NIC (x 0.8) plus its latency.
  EXPECT_EQ(cost.KvTransferNs(1000), std::llround(1000 * kLlamaKv / (50e9 * 0.8) * 1e9) + 10'000);
  DeploymentConfig d;
  d.tp = 2;
  d.pd_transfer_inter_node = false;  // two GPUs each send half, over NVLink
  EXPECT_EQ(Make("h100", "llama-3.1-8b", d).KvTransferNs(1000),
            std::llround(1000 * kLlamaKv / (2 * kNvlink) * 1e9) + 5'000);
}

// An engine profile with one coefficient set (the rest: the bare roofline's).
EngineProfile With(const std::string& name, double value) {
  EngineProfile p;
  EXPECT_TRUE(SetCoefficient(&p, name, value).ok()) << name;
  return p;
}

CostModel MakeWith(const std::string& gpu, const std::string& model, const EngineProfile& engine,
                   DeploymentConfig d = {}) {
  d.engine = engine;
  return Make(gpu, model, d);
}

// The shipped startup coefficients against the published cold starts they were set from and
// the one they were not (sources in vllm-0.12's and sglang-0.5.20's startup comments;
// docs/perfmodel.md "Cold start"): vLLM's Qwen3-8B on one GPU (50.87 s, fitted),
// Llama-3.3-70B FP8 on one H100 (about 62 s, held out: +8%; on h200, where the model fits one
// GPU, over the same host link); SGLang's same 70B (about 58 s, held out: -31%).
TEST(StepCostTest, ShippedStartupsMatchThePublishedColdStarts) {
  EngineProfile vllm, sglang;
  ASSERT_TRUE(LoadEngineProfile("vllm-0.12", &vllm).ok());
  ASSERT_TRUE(LoadEngineProfile("sglang-0.5.20", &sglang).ok());
  DeploymentConfig fp8;
  fp8.precision = "fp8";
  auto s = [](const CostModel& c) { return static_cast<double>(c.ColdStartNs()) / 1e9; };
  EXPECT_NEAR(s(MakeWith("h100", "qwen3-8b", vllm)), 50.87, 50.87 * 0.02);
  EXPECT_NEAR(s(MakeWith("h200", "llama-3.1-70b", vllm, fp8)), 62 * 1.08, 62 * 0.02);
  EXPECT_NEAR(s(MakeWith("h200", "llama-3.1-70b", sglang, fp8)), 58 * 0.69, 58 * 0.02);
}

// Tied embeddings: the output projection is the embedding matrix, read every step (21% of
// SmolLM2-135M's weights); before the fix the step never read it.
TEST(StepCostTest, TiedEmbeddingIsReadEveryStepAsTheOutputProjection) {
  const CostModel cost = Make("h100", "smollm2-135m");
  const ModelParams& p = cost.params();
  EXPECT_EQ(p.lm_head, 0);
  EXPECT_DOUBLE_EQ(p.output_projection, 49152.0 * 576);
  const StepCost c = cost.Step(kOneDecodeAt1000);
  EXPECT_DOUBLE_EQ(c.weight_bytes, p.total * 0.73);
  // FLOPs: the sampled token's logits over the shared matrix are in.
  EXPECT_GT(c.flops, 2 * p.total);
}

// The per-layer floor: with CUDA graphs (a decode step) each layer adds its small kernels; a
// prefill step beyond the graphs' size runs eagerly, and the GPU waits for the CPU's launches
// when they take longer than the work.
TEST(StepCostTest, LayerFloorWithAndWithoutCudaGraphs) {
  EngineProfile e;
  ASSERT_TRUE(SetCoefficient(&e, "launch.layer_gpu_us", 5).ok());
  ASSERT_TRUE(SetCoefficient(&e, "launch.layer_launch_us", 400).ok());
  e.coefficients.cuda_graph_max_tok = 256;
  const CostModel bare = Make("h100", "llama-3.1-8b");
  const CostModel floor = MakeWith("h100", "llama-3.1-8b", e);
  const StepCost graphed = floor.Step(kOneDecodeAt1000);
  EXPECT_TRUE(graphed.cuda_graphs);
  EXPECT_NEAR(graphed.total_ns - bare.Step(kOneDecodeAt1000).total_ns, 32 * 5e3, 2);
  // 512 prompt tokens: no graph; 32 x 400 us of launches exceed the GPU's work.
  const std::vector<BatchEntry> prefill = {{0, 512, 1}};
  const StepCost eager = floor.Step(prefill);
  EXPECT_FALSE(eager.cuda_graphs);
  EXPECT_NEAR(static_cast<double>(eager.total_ns), 32 * 400e3, 2);
  EXPECT_GT(bare.Step(prefill).total_ns, 0);
  EXPECT_LT(bare.Step(prefill).total_ns, eager.total_ns);
}

// An MLA layer's extra floor is added to every layer of an MLA model (DeepSeek-V3: 61) and to no
// layer of a GQA one (Qwen3-30B-A3B, MoE too).
TEST(StepCostTest, MlaLayerFloorOnlyOnMlaModels) {
  DeploymentConfig d;
  d.tp = 8;
  const EngineProfile e = With("launch.mla_layer_gpu_us", 150);
  const CostModel v3 = Make("h200", "deepseek-v3", d);
  const CostModel v3_floor = MakeWith("h200", "deepseek-v3", e, d);
  EXPECT_NEAR(v3_floor.Step(kOneDecodeAt1000).floor_ns - v3.Step(kOneDecodeAt1000).floor_ns,
              61 * 150e3, 2);
  const CostModel qwen = Make("h200", "qwen3-30b-a3b", d);
  const CostModel qwen_floor = MakeWith("h200", "qwen3-30b-a3b", e, d);
  EXPECT_EQ(qwen_floor.Step(kOneDecodeAt1000).total_ns, qwen.Step(kOneDecodeAt1000).total_ns);
}

// TP's all-reduces have a latency floor per call: two per layer.
TEST(StepCostTest, CollectiveLatencyFloorPerLayerAtTensorParallel) {
  DeploymentConfig d;
  d.tp = 4;
  const CostModel bare = Make("h100", "llama-3.1-70b", d);
  const CostModel floored =
      MakeWith("h100", "llama-3.1-70b", With("collectives.allreduce_us", 12), d);
  EXPECT_NEAR(floored.Step(kOneDecodeAt1000).comm_ns - bare.Step(kOneDecodeAt1000).comm_ns,
              80 * 2 * 12e3, 1);
  d.tp = 1;
  d.precision = "fp8";
  const CostModel tp1 = MakeWith("h200", "llama-3.1-70b", With("collectives.allreduce_us", 12), d);
  EXPECT_EQ(tp1.Step(kOneDecodeAt1000).comm_ns, 0);
}

// Small steps cannot fill the tensor cores: with gemm_half_tok, 64-token steps run their GEMMs at
// half the efficiency of large ones, so a token costs more compute in a small step.
TEST(StepCostTest, GemmEfficiencyGrowsWithTokensPerStep) {
  const CostModel cost = MakeWith("h100", "llama-3.1-8b", With("kernels.gemm_half_tok", 64));
  const CostModel bare = Make("h100", "llama-3.1-8b");
  const std::vector<BatchEntry> small = {{0, 64, 0}};
  const std::vector<BatchEntry> large = {{0, 4096, 0}};
  const double dense_small_ns = 2 * (kLlamaParams - 2 * kLlamaEmbedding) * 64 / (989e12 * 0.6);
  const StepCost s = cost.Step(small);
  const StepCost b = bare.Step(small);
  EXPECT_NEAR(s.compute_ns - b.compute_ns, dense_small_ns * 1e9, 1);  // twice the dense time
  const double per_token_small = cost.Step(small).compute_ns / 64;
  const double per_token_large = cost.Step(large).compute_ns / 4096;
  EXPECT_GT(per_token_small, per_token_large * 0.9);
}

// MoE: expert GEMMs at t tokens per expert; one decode token per expert runs far below peak.
TEST(StepCostTest, ExpertEfficiencyFollowsTokensPerExpert) {
  EngineProfile e;
  ASSERT_TRUE(SetCoefficient(&e, "kernels.expert_half_tok", 32).ok());
  ASSERT_TRUE(SetCoefficient(&e, "kernels.expert_read_efficiency", 0.5).ok());
  const CostModel bare = Make("h200", "qwen3-30b-a3b");
  const CostModel moe = MakeWith("h200", "qwen3-30b-a3b", e);
  // A decode step is memory-bound: expert weights at half the bandwidth.
  const StepCost one = moe.Step({{999, 1, 1}});
  const StepCost one_bare = bare.Step({{999, 1, 1}});
  EXPECT_GT(one.total_ns, one_bare.total_ns);
  // 8192 prompt tokens: 512 per expert, near full efficiency (512 / 544).
  std::vector<BatchEntry> big = {{0, 8192, 1}};
  EXPECT_LT(static_cast<double>(moe.Step(big).total_ns),
            static_cast<double>(bare.Step(big).total_ns) * 1.3);
}

// A lone decode token gives each of its k experts one token (tokens per expert counted over the
// experts hit, not over all E): with expert_half_tok h its expert GEMMs cost (1 + h) x their
// FLOPs at full efficiency, not (k/E + h) / (k/E) x (16 x more for Qwen3-30B-A3B's 8 of 128),
// which made a MoE model's batch-1 step pay for every expert. Qwen3-30B-A3B: 48 MoE layers of
// 8 active experts of 3 x 2048 x 768 parameters; H200 989 TFLOP/s x 0.6 bf16.
TEST(StepCostTest, LoneTokenGivesEachOfItsExpertsOneToken) {
  auto expert_ns = [](double half_tok) {
    EngineProfile e;
    EXPECT_TRUE(SetCoefficient(&e, "kernels.expert_gemm_efficiency", 1).ok());
    EXPECT_TRUE(SetCoefficient(&e, "kernels.expert_half_tok", half_tok).ok());
    return static_cast<double>(MakeWith("h200", "qwen3-30b-a3b", e).Step({{999, 1, 1}}).compute_ns);
  };
  const double flops = 2.0 * 48 * 8 * 3 * 2048 * 768;
  const double full_ns = flops / (989e12 * 0.6) * 1e9;
  EXPECT_NEAR(expert_ns(32) - expert_ns(0), 32 * full_ns, 0.01 * 32 * full_ns);
}

// Attention by kind. MLA decodes in its absorbed form (scores over the 512 + 64 latent, values
// over 512: 2 x 128 x 1088 FLOPs per pair and layer) and prefills decompressed; a sliding
// window reads at most its window; sparse attention reads top-k plus the indexer's keys.
TEST(StepCostTest, AttentionCostByKind) {
  DeploymentConfig d;
  d.tp = 8;
  const CostModel v3 = Make("h200", "deepseek-v3", d);
  const StepCost decode = v3.Step({{9999, 1, 1}});
  const StepCost no_context = v3.Step({{0, 1, 1}});
  EXPECT_NEAR(decode.flops - no_context.flops, 2.0 * 128 * (2 * 512 + 64) * 61 * 9999, 1e3);
  ModelProfile sliding;
  ASSERT_TRUE(ParseModelProfile(R"(name: window
layers: 4
hidden_size: 1024
intermediate_size: 4096
vocab_size: 32000
attention: {kind: gqa, heads: 8, kv_heads: 8, head_dim: 128, sliding_window: 100, sliding_layers: 2,
            sparse: {top_k: 10, indexer_heads: 2, indexer_head_dim: 64}}
)",
                                "window.yaml", &sliding)
                  .ok());
  HardwareProfile hw;
  ASSERT_TRUE(LoadHardwareProfile("h100", &hw).ok());
  CostModel cost;
  ASSERT_TRUE(CostModel::Create(hw, sliding, {}, &cost).ok());
  // Per layer a token's KV is 2 x 8 x 128 x 2 bytes; at 1000 cached tokens the window layers
  // read 100, the sparse layers 10 of KV plus 1000 indexer keys of 64 bytes.
  const double kv_layer = 2.0 * 8 * 128 * 2;
  EXPECT_DOUBLE_EQ(cost.Step(kOneDecodeAt1000).kv_bytes,
                   2 * 100 * kv_layer + 2 * 10 * kv_layer + 2 * 1000 * 64.0);
}

// The engine's CPU time grows with the batch; the overlapped share hides behind the GPU.
TEST(StepCostTest, CpuTimeGrowsWithTheBatchAndOverlaps) {
  EngineProfile e;
  ASSERT_TRUE(SetCoefficient(&e, "cpu.step_us", 300).ok());
  ASSERT_TRUE(SetCoefficient(&e, "cpu.seq_us", 10).ok());
  const CostModel cost = MakeWith("h100", "llama-3.1-8b", e);
  const std::vector<BatchEntry> one(1, BatchEntry{999, 1, 1}), many(64, BatchEntry{999, 1, 1});
  EXPECT_DOUBLE_EQ(cost.Step(one).cpu_ns, 310e3);
  EXPECT_DOUBLE_EQ(cost.Step(many).cpu_ns, 300e3 + 640e3);
  EXPECT_EQ(cost.Step(many).total_ns, std::llround(cost.Step(many).gpu_ns + 940e3));
  ASSERT_TRUE(SetCoefficient(&e, "cpu.overlap", 1).ok());
  const CostModel overlapped = MakeWith("h100", "llama-3.1-8b", e);
  EXPECT_EQ(overlapped.Step(many).total_ns, std::llround(overlapped.Step(many).gpu_ns));
}

// DP attention: one instance of tp GPUs whose attention groups each hold full attention weights
// and only their own requests' KV; MLA's latent is then not replicated over the 8 ranks, so the
// instance holds 8x the tokens of plain TP 8.
TEST(StepCostTest, DpAttentionReplicatesAttentionWeightsAndSplitsTheKv) {
  DeploymentConfig d;
  d.tp = 8;
  const CostModel tp8 = Make("h200", "deepseek-v3", d);
  d.dp_attention = 8;
  const CostModel dpa = Make("h200", "deepseek-v3", d);
  const ModelParams& p = tp8.params();
  const double attention = p.attention_per_layer * 61;
  EXPECT_NEAR(dpa.weight_bytes_per_gpu() - tp8.weight_bytes_per_gpu(), attention * (1 - 1.0 / 8),
              1);
  const double tp8_room = 141e9 * 0.9 - 1e9 - tp8.weight_bytes_per_gpu();
  const double dpa_room = 141e9 * 0.9 - 1e9 - dpa.weight_bytes_per_gpu();
  EXPECT_EQ(tp8.kv_capacity_tok(), static_cast<int64_t>(tp8_room / tp8.kv_bytes_per_token()));
  EXPECT_EQ(dpa.kv_capacity_tok(), 8 * static_cast<int64_t>(dpa_room / dpa.kv_bytes_per_token()));
  std::vector<BatchEntry> batch(64, BatchEntry{2000, 1, 1});
  EXPECT_NEAR(dpa.Step(batch).kv_bytes, tp8.Step(batch).kv_bytes / 8, 1);
  d.dp_attention = 3;
  EXPECT_FALSE(TryMake("h200", "deepseek-v3", d).ok());
}

// gpu_memory_utilization sizes the KV cache: 70B at TP 4 on H100s keeps a tenth of the room at 0.5
// and none at 0.45 (35 GB of weights per GPU).
TEST(StepCostTest, KvCapacityFollowsTheMemoryFraction) {
  DeploymentConfig d;
  d.tp = 4;
  const CostModel full = Make("h100", "llama-3.1-70b", d);
  d.gpu_memory_utilization = 0.5;
  const CostModel half = Make("h100", "llama-3.1-70b", d);
  EXPECT_LT(half.kv_capacity_tok(), full.kv_capacity_tok() / 9);
  d.gpu_memory_utilization = 0.45;
  const Status s = TryMake("h100", "llama-3.1-70b", d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gpu_memory_utilization 0.45"), std::string::npos) << s.message();
}

// gpt-oss-20b: 12 of its 24 layers attend to the last 128 tokens. An engine that pools their KV
// apart (vLLM's hybrid KV manager: ratio 0) fits twice the tokens of one that gives every layer
// every token (ratio 1); SGLang's SWA pool at 0.8 gives the sliding layers 0.8 of a token each:
// 24 / (12 + 0.8 x 12) = 1.11x. A model without sliding layers is unaffected.
TEST(StepCostTest, KvCapacityCreditsAnEnginesSlidingWindowPool) {
  DeploymentConfig d;
  const int64_t one_pool = Make("a100", "gpt-oss-20b", d).kv_capacity_tok();
  d.sliding_kv_ratio = 0;
  EXPECT_NEAR(static_cast<double>(Make("a100", "gpt-oss-20b", d).kv_capacity_tok()),
              2.0 * one_pool, 2);
  d.sliding_kv_ratio = 0.8;
  EXPECT_NEAR(static_cast<double>(Make("a100", "gpt-oss-20b", d).kv_capacity_tok()),
              one_pool * 24 / (12 + 0.8 * 12), 2);
  EXPECT_EQ(Make("h100", "llama-3.1-8b", d).kv_capacity_tok(),
            Make("h100", "llama-3.1-8b").kv_capacity_tok());
}

// LoRA: an adapter of rank 16 on Llama 3.1 8B's q, k, v, o, gate, up and down projections has
// 41,943,040 weights: 32 layers x 16 x (3 x 4096 + 4096 + 2 x 1024 + 4096 + 4096 + 3 x 4096 +
// 3 x 14336), the figure PEFT's print_trainable_parameters is widely quoted printing for a rank-16
// adapter on all seven projections of Llama-3-8B (the same shapes; quoted, not re-run here: PEFT
// is not installed). A step reads each distinct adapter once, and every adapted token runs
// through its A and B.
TEST(StepCostTest, LoraAdaptersCostTheirWeightsPerDistinctAdapterAndTheirMatmulsPerToken) {
  constexpr double kLoraParams = 41'943'040.0;
  DeploymentConfig d;
  d.lora_rank = 16;
  d.max_loras = 4;
  const CostModel cost = Make("h100", "llama-3.1-8b", d);
  EXPECT_DOUBLE_EQ(cost.lora_params_per_adapter(), kLoraParams);
  const CostModel base = Make("h100", "llama-3.1-8b");
  EXPECT_DOUBLE_EQ(base.lora_params_per_adapter(), 0);
  // Base requests cost what they cost without LoRA.
  const std::vector<BatchEntry> plain = {{999, 1, 1}, {499, 1, 1}};
  EXPECT_EQ(cost.Step(plain).total_ns, base.Step(plain).total_ns);
  EXPECT_EQ(cost.Step(plain).lora_bytes, 0);
  // Two decodes of one adapter read it once; of two adapters, twice.
  const StepCost one = cost.Step({{999, 1, 1, 0}, {499, 1, 1, 0}});
  const StepCost two = cost.Step({{999, 1, 1, 0}, {499, 1, 1, 1}});
  EXPECT_DOUBLE_EQ(one.lora_bytes, kLoraParams * 2);
  EXPECT_DOUBLE_EQ(two.lora_bytes, 2 * kLoraParams * 2);
  EXPECT_DOUBLE_EQ(one.flops - base.Step(plain).flops, 2 * kLoraParams * 2);
  // Memory-bound decodes: each adapter read adds its bytes over the weight-read bandwidth.
  EXPECT_NEAR(static_cast<double>(two.total_ns - one.total_ns), kLoraParams * 2 / kH100Hbm * 1e9,
              2);
  EXPECT_GT(one.total_ns, base.Step(plain).total_ns);
  // At tp 2 each GPU holds half of every adapter, and loads its half over its own host link.
  d.tp = 2;
  const CostModel tp2 = Make("h100", "llama-3.1-8b", d);
  EXPECT_DOUBLE_EQ(tp2.Step({{999, 1, 1, 0}}).lora_bytes, kLoraParams);
  HardwareProfile h100;
  ASSERT_TRUE(LoadHardwareProfile("h100", &h100).ok());
  EXPECT_EQ(tp2.LoraLoadNs(), std::llround(kLoraParams / h100.host_link_bytes_per_s * 1e9));
  EXPECT_EQ(cost.LoraLoadNs(), std::llround(kLoraParams * 2 / h100.host_link_bytes_per_s * 1e9));
  EXPECT_EQ(base.LoraLoadNs(), 0);
}

}  // namespace
}  // namespace servesweep::perfmodel
