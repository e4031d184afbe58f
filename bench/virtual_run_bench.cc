// `plan --simulate`'s own path, in CPU time: a matrix loaded from YAML, each run through
// ExecuteVirtualRun (engine profile chosen by engine and version, the performance model in
// virtual time, the load generator's metric code, the record with its calibration label).
// Two cases, the issue's bars: one 1,000-request run (Llama 3.1 8B, H100, vLLM, closed loop at
// concurrency 64, 1000 in / 200 out) and a 100-run matrix (tp 1/2/4/8 x concurrency
// 1/4/16/64/256 x input 128/512/1024/2048/4096 tokens, Llama 3.1 70B on H200, 200 requests of
// 200 output tokens each). Google Benchmark's "CPU" column is the figure (bench/README.md).
#include <benchmark/benchmark.h>
#include <capnp/message.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "matrix/matrix_loader.h"
#include "record/virtual_run.h"

namespace servesweep::agent {
namespace {

constexpr const char* kOneRun = R"(name: bench-one-run
engine: vllm
engine_version: 0.11.0
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload: {input_len: 1000, output_len: 200, num_requests: 1000, concurrency: 64}
local: {agents: 1, gpus_per_agent: 8}
)";

constexpr const char* kHundredRuns = R"(name: bench-hundred-runs
engine: vllm
engine_version: 0.11.0
model: meta-llama/Llama-3.1-70B-Instruct
precision: fp8
sim: {hardware: h200}
workload: {output_len: 200, num_requests: 200}
local: {agents: 1, gpus_per_agent: 8}
axes:
  layout: [{tp: 1}, {tp: 2}, {tp: 4}, {tp: 8}]
  concurrency: [1, 4, 16, 64, 256]
  input_len: [128, 512, 1024, 2048, 4096]
)";

// The matrix from a temporary file (the loader reads files: its errors carry file:line:column).
void Load(const char* yaml, matrix::LoadedMatrix* out) {
  char path[] = "/tmp/virtual_run_bench_XXXXXX.yaml";
  const int fd = ::mkstemps(path, 5);
  if (fd < 0) std::abort();
  ::close(fd);
  std::ofstream(path) << yaml;
  const Status s = matrix::LoadMatrixFile(path, out);
  std::remove(path);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::abort();
  }
}

void RunAll(benchmark::State& state, const char* yaml) {
  matrix::LoadedMatrix loaded;
  Load(yaml, &loaded);
  const auto runs = loaded.matrix().getRuns();
  int64_t requests = 0;
  for (auto _ : state) {
    for (auto spec : runs) {
      capnp::MallocMessageBuilder message;
      auto result = message.initRoot<schema::RunResult>();
      record::ExecuteVirtualRun(spec, record::VirtualRunOptions{}, result);
      if (result.getStatus() != schema::RunStatus::OK) {
        state.SkipWithError(result.getError().cStr());
        return;
      }
      requests += spec.getWorkload().getNumRequests();
    }
  }
  state.counters["runs"] = static_cast<double>(runs.size());
  state.counters["sim_requests_per_s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
}

void BM_VirtualRun1000Requests(benchmark::State& state) { RunAll(state, kOneRun); }
BENCHMARK(BM_VirtualRun1000Requests)->Unit(benchmark::kMillisecond);

void BM_Matrix100Runs(benchmark::State& state) { RunAll(state, kHundredRuns); }
BENCHMARK(BM_Matrix100Runs)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace servesweep::agent

BENCHMARK_MAIN();
