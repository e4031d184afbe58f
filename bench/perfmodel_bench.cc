// The performance model's virtual-time driver: simulated requests per second of host time, for
// 1000-request runs of Llama 3.1 8B on an H100 (closed loop at concurrency 1/16/64/256, 1000
// input and 200 output tokens) and of DeepSeek-V3 on 2 x 8 H200 (TP 8 x DP 2, EP 16, open loop
// at 20 requests/s with Mooncake-like shared prefixes), plus the cost of one step evaluation.
#include <benchmark/benchmark.h>

#include "perfmodel/simulate.h"

namespace servesweep::perfmodel {
namespace {

struct Profiles {
  HardwareProfile hw;
  ModelProfile model;
};

Profiles Load(const char* gpu, const char* model) {
  Profiles p;
  if (!LoadHardwareProfile(gpu, &p.hw).ok() || !LoadModelProfile(model, &p.model).ok()) {
    std::abort();
  }
  return p;
}

void Report(benchmark::State& state, int64_t requests, const SimulationResult& last) {
  state.counters["sim_requests_per_s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["steps"] = static_cast<double>(last.final_snapshot.steps);
  state.counters["sim_output_tok_per_s"] = last.summary.output_tok_per_s;
}

void BM_ClosedLoopLlama8B(benchmark::State& state) {
  const Profiles p = Load("h100", "llama-3.1-8b");
  Workload w;
  w.concurrency = static_cast<int>(state.range(0));
  for (uint64_t i = 0; i < 1000; ++i) w.requests.push_back({i, 0, 1000, 200, {}});
  SimulationResult result;
  int64_t requests = 0;
  for (auto _ : state) {
    if (!SimulateWorkload(p.hw, p.model, {}, w, &result).ok()) std::abort();
    requests += static_cast<int64_t>(w.requests.size());
  }
  Report(state, requests, result);
}
BENCHMARK(BM_ClosedLoopLlama8B)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_OpenLoopDeepSeekV3Ep16(benchmark::State& state) {
  const Profiles p = Load("h200", "deepseek-v3");
  DeploymentConfig d;
  d.tp = 8;
  d.dp = 2;
  d.ep = 16;
  Workload w;
  uint64_t x = 42;
  auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (uint64_t i = 0; i < 1000; ++i) {
    const auto input = static_cast<int32_t>(500 + next() % 8000);
    std::vector<uint64_t> hashes;
    for (int b = 0; b * 512 < input; ++b) hashes.push_back(b < 2 ? next() % 8 : next());
    w.requests.push_back({i, static_cast<int64_t>(i) * 50'000'000, input,
                          static_cast<int32_t>(50 + next() % 400), hashes});
  }
  SimulationResult result;
  int64_t requests = 0;
  for (auto _ : state) {
    if (!SimulateWorkload(p.hw, p.model, d, w, &result).ok()) std::abort();
    requests += static_cast<int64_t>(w.requests.size());
  }
  Report(state, requests, result);
}
BENCHMARK(BM_OpenLoopDeepSeekV3Ep16)->Unit(benchmark::kMillisecond);

void BM_StepCost(benchmark::State& state) {
  const Profiles p = Load("h200", "qwen3-30b-a3b");
  CostModel cost;
  if (!CostModel::Create(p.hw, p.model, {}, &cost).ok()) std::abort();
  std::vector<BatchEntry> batch(static_cast<size_t>(state.range(0)), BatchEntry{2000, 1, 1});
  for (auto _ : state) benchmark::DoNotOptimize(cost.Step(batch).total_ns);
}
BENCHMARK(BM_StepCost)->Arg(1)->Arg(64)->Arg(256);

}  // namespace
}  // namespace servesweep::perfmodel

BENCHMARK_MAIN();
