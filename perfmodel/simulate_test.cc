#include "perfmodel/simulate.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace servesweep::perfmodel {
namespace {

struct Profiles {
  HardwareProfile hw;
  ModelProfile model;
};

Profiles Load(const std::string& gpu, const std::string& model) {
  Profiles s;
  EXPECT_TRUE(LoadHardwareProfile(gpu, &s.hw).ok());
  EXPECT_TRUE(LoadModelProfile(model, &s.model).ok());
  return s;
}

Workload Uniform(int n, int32_t input, int32_t output, int concurrency, int64_t gap_ns = 0) {
  Workload w;
  w.concurrency = concurrency;
  for (int i = 0; i < n; ++i) {
    w.requests.push_back({static_cast<uint64_t>(i), i * gap_ns, input, output, {}});
  }
  return w;
}

SimulationResult Simulate(const Profiles& s, const DeploymentConfig& d, const Workload& w) {
  SimulationResult r;
  Status st = SimulateWorkload(s.hw, s.model, d, w, &r);
  EXPECT_TRUE(st.ok()) << st.message();
  return r;
}

TEST(SimulateTest, ClosedLoopKeepsConcurrencyRequestsInFlight) {
  const Profiles s = Load("h100", "llama-3.1-8b");
  const SimulationResult r = Simulate(s, {}, Uniform(40, 500, 50, 8));
  ASSERT_EQ(r.requests.size(), 40u);
  EXPECT_EQ(r.summary.finished, 40);
  // At every arrival, at most 8 requests are between arrival and finish (itself included).
  for (const RequestRecord& a : r.requests) {
    int in_flight = 0;
    for (const RequestRecord& b : r.requests) {
      if (b.arrival_ns <= a.arrival_ns && b.finish_ns > a.arrival_ns) ++in_flight;
    }
    EXPECT_LE(in_flight, 8);
  }
  // The ninth request starts when the first one ends.
  std::vector<int64_t> finishes;
  for (const auto& rec : r.requests) finishes.push_back(rec.finish_ns);
  std::sort(finishes.begin(), finishes.end());
  EXPECT_EQ(r.requests[8].arrival_ns, finishes[0]);
  EXPECT_EQ(r.requests[0].arrival_ns, 0);
  for (const auto& rec : r.requests) {
    int32_t tokens = 0;
    for (const auto& c : rec.chunks) tokens += c.tokens;
    EXPECT_EQ(tokens, 50);
    EXPECT_EQ(rec.first_token_ns, rec.chunks.front().time_ns);
  }
}

TEST(SimulateTest, OpenLoopKeepsArrivalTimes) {
  const Profiles s = Load("h100", "llama-3.1-8b");
  const SimulationResult r = Simulate(s, {}, Uniform(10, 500, 20, 0, 123'000'000));
  for (size_t i = 0; i < r.requests.size(); ++i) {
    EXPECT_EQ(r.requests[i].arrival_ns, static_cast<int64_t>(i) * 123'000'000);
  }
  EXPECT_EQ(r.summary.finished, 10);
  EXPECT_GT(r.summary.ttft_mean_ns, 0);
}

TEST(SimulateTest, CappedOpenLoopHoldsRequestsOnTheClientUntilOneEnds) {
  const Profiles s = Load("h100", "llama-3.1-8b");
  // 30 requests due every 1 ms, each lasting far longer: with a cap of 4, never more than 4 are
  // in flight, request 4 is sent exactly when the first one ends, and the first 4 keep their
  // arrival times.
  Workload w = Uniform(30, 500, 100, 0, 1'000'000);
  w.max_in_flight = 4;
  const SimulationResult r = Simulate(s, {}, w);
  EXPECT_EQ(r.summary.finished, 30);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.requests[i].arrival_ns, i * 1'000'000);
  std::vector<int64_t> finishes;
  for (const auto& rec : r.requests) finishes.push_back(rec.finish_ns);
  std::sort(finishes.begin(), finishes.end());
  EXPECT_EQ(r.requests[4].arrival_ns, finishes[0]);
  for (const RequestRecord& a : r.requests) {
    int in_flight = 0;
    for (const RequestRecord& b : r.requests) {
      if (b.arrival_ns <= a.arrival_ns && b.finish_ns > a.arrival_ns) ++in_flight;
    }
    EXPECT_LE(in_flight, 4);
  }
  // Without the cap all 30 arrive on time.
  w.max_in_flight = 0;
  const SimulationResult open = Simulate(s, {}, w);
  EXPECT_EQ(open.requests[29].arrival_ns, 29 * 1'000'000);
}

TEST(SimulateTest, SamplesEngineStateAtTheInterval) {
  const Profiles s = Load("h100", "llama-3.1-8b");
  Workload w = Uniform(16, 500, 50, 8);
  w.sample_interval_ns = 10'000'000;
  const SimulationResult r = Simulate(s, {}, w);
  ASSERT_GE(r.samples.size(), 3u);
  // One sample per 10 ms up to the end, then the final state.
  for (size_t i = 0; i + 1 < r.samples.size(); ++i) {
    EXPECT_EQ(r.samples[i].time_ns, static_cast<int64_t>(i) * 10'000'000);
  }
  EXPECT_EQ(r.samples.size() - 1, static_cast<size_t>(r.final_snapshot.time_ns / 10'000'000) + 1);
  // The first sample is taken before anything ran, so counters' differences count everything.
  EXPECT_EQ(r.samples.front().prefix_queries_tok, 0);
  EXPECT_EQ(r.samples.front().running, 0);
  int32_t running_max = 0;
  for (const auto& sample : r.samples) running_max = std::max(running_max, sample.running);
  EXPECT_EQ(running_max, 8);
  EXPECT_EQ(r.samples.back().generation_tok, 16 * 50);
}

// Throughput rises with concurrency while the batch grows, then plateaus once the KV cache is
// full: requests wait and preemptions appear (Llama 70B fp8 on one H200: about 55 GB of KV,
// some 38 requests of 4400 tokens).
TEST(SimulateTest, ThroughputRisesThenPlateausWhenTheKvCacheIsFull) {
  const Profiles s = Load("h200", "llama-3.1-70b");
  DeploymentConfig d;
  d.precision = "fp8";
  std::vector<double> throughput;
  std::vector<int64_t> preemptions;
  for (int c : {1, 4, 16, 64, 128}) {
    const SimulationResult r = Simulate(s, d, Uniform(2 * c + 64, 4000, 400, c));
    throughput.push_back(r.summary.output_tok_per_s);
    preemptions.push_back(r.final_snapshot.preemptions);
  }
  EXPECT_GT(throughput[1], 2 * throughput[0]);  // batching pays while the cache has room
  EXPECT_GT(throughput[2], 1.5 * throughput[1]);
  EXPECT_EQ(preemptions[0], 0);
  EXPECT_EQ(preemptions[1], 0);
  // Full cache: more concurrency buys at most 10% more, and preemptions appear.
  EXPECT_LT(throughput[4], 1.1 * throughput[3]);
  EXPECT_GT(preemptions[4], 0);
}

TEST(SimulateTest, RefusesDuplicateIds) {
  const Profiles s = Load("h100", "llama-3.1-8b");
  Workload w = Uniform(3, 10, 10, 1);
  w.requests[2].id = 0;
  SimulationResult r;
  Status st = SimulateWorkload(s.hw, s.model, {}, w, &r);
  EXPECT_EQ(st.message(), "workload: request id 0 appears twice");
}

// Llama 3.1 70B (fp8) on H200 over TP = 1, 2, 4, 8: more TP gives lower inter-token latency at
// concurrency 1, but less output per GPU at concurrency 64.
TEST(SimulateTest, TensorParallelSweepDirections) {
  const Profiles s = Load("h200", "llama-3.1-70b");
  double tpot[4], per_gpu[4];
  int i = 0;
  for (int tp : {1, 2, 4, 8}) {
    DeploymentConfig d;
    d.tp = tp;
    d.precision = "fp8";
    tpot[i] = Simulate(s, d, Uniform(4, 1000, 100, 1)).summary.tpot_mean_ns;
    per_gpu[i] = Simulate(s, d, Uniform(256, 1000, 100, 64)).summary.output_tok_per_s / tp;
    ++i;
  }
  for (int k = 1; k < 4; ++k) {
    EXPECT_LT(tpot[k], tpot[k - 1]) << "tp " << (1 << k);
    EXPECT_LT(per_gpu[k], per_gpu[k - 1]) << "tp " << (1 << k);
  }
  EXPECT_GT(tpot[0] / tpot[3], 3);  // memory-bound: close to the TP factor, less the all-reduces
}

// DeepSeek-V3 (fp8) on two 8-GPU H200 nodes, TP 8 x DP 2: spreading the experts over all 16
// GPUs frees memory for KV cache but pays an inter-node all-to-all per MoE layer.
TEST(SimulateTest, ExpertParallelTradesKvRoomForAllToAll) {
  const Profiles s = Load("h200", "deepseek-v3");
  DeploymentConfig d;
  d.tp = 8;
  d.dp = 2;
  const SimulationResult ep1 = Simulate(s, d, Uniform(2, 1000, 50, 1));
  d.ep = 16;
  const SimulationResult ep16 = Simulate(s, d, Uniform(2, 1000, 50, 1));
  EXPECT_GT(ep16.final_snapshot.kv_capacity_tok, ep1.final_snapshot.kv_capacity_tok);
  EXPECT_GT(ep16.summary.tpot_mean_ns, ep1.summary.tpot_mean_ns);
}

// On two GPUs, 1 prefill + 1 decode instance against 2 aggregated replicas under a mix of long
// prompts: disaggregation pays the KV transfer in time to first token, and keeps decode steps
// free of prefill chunks.
TEST(SimulateTest, DisaggregationSweepDirections) {
  const Profiles s = Load("h100", "llama-3.1-8b");
  Workload w = Uniform(60, 6000, 200, 0, 150'000'000);
  DeploymentConfig agg;
  agg.dp = 2;
  DeploymentConfig pd;
  pd.prefill_instances = 1;
  pd.decode_instances = 1;
  const WorkloadSummary a = Simulate(s, agg, w).summary;
  const WorkloadSummary p = Simulate(s, pd, w).summary;
  EXPECT_EQ(a.finished, 60);
  EXPECT_EQ(p.finished, 60);
  EXPECT_LT(p.tpot_mean_ns, a.tpot_mean_ns);

  // One request alone: TTFT grows by exactly the transfer.
  const Workload one = Uniform(1, 6000, 10, 1);
  const WorkloadSummary a1 = Simulate(s, agg, one).summary;
  const WorkloadSummary p1 = Simulate(s, pd, one).summary;
  CostModel cost;
  ASSERT_TRUE(CostModel::Create(s.hw, s.model, pd, &cost).ok());
  EXPECT_DOUBLE_EQ(p1.ttft_mean_ns - a1.ttft_mean_ns, static_cast<double>(cost.KvTransferNs(6000)));
}

// One draft token accepted 80% of the time: a memory-bound dense model verifies two tokens for
// the price of about one; an MoE model's draft tokens hit more experts, so it gains less.
TEST(SimulateTest, SpeculativeDecodingRaisesThroughput) {
  double gain[2];
  int i = 0;
  for (const char* model : {"llama-3.1-8b", "deepseek-v3"}) {
    const Profiles s = Load("h200", model);
    DeploymentConfig d;
    d.tp = model == std::string("deepseek-v3") ? 8 : 1;
    const WorkloadSummary plain = Simulate(s, d, Uniform(64, 1000, 200, 16)).summary;
    d.spec_num_tok = 1;
    d.spec_mean_accepted_tok = 0.8;
    const WorkloadSummary mtp = Simulate(s, d, Uniform(64, 1000, 200, 16)).summary;
    EXPECT_GT(mtp.chunk_tok_mean, 1.7);
    EXPECT_DOUBLE_EQ(plain.chunk_tok_mean, 1.0);
    EXPECT_LT(mtp.tpot_mean_ns, plain.tpot_mean_ns);
    gain[i++] = mtp.output_tok_per_s / plain.output_tok_per_s;
  }
  EXPECT_GT(gain[0], 1.35);
  EXPECT_GT(gain[1], 1.05);
  EXPECT_LT(gain[1], gain[0]);
}

}  // namespace
}  // namespace servesweep::perfmodel
