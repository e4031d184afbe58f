// The coordinator's cost per result: encoding (agent side), decoding + copying (coordinator
// side), and committing to SQLite (one transaction, synchronous=FULL). Results carry `requests`
// per-request records of 128 chunk times each.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "common/ids.h"
#include "matrix/matrix_loader.h"
#include "results/results_store.h"
#include "transport/envelope_codec.h"

namespace servesweep {
namespace {

constexpr int kChunksPerRequest = 128;

void BuildResult(capnp::MallocMessageBuilder& message, int requests, const std::string& run_id) {
  auto result = NewEnvelope(message).initResult();
  result.setRunId(run_id);
  result.setAttempt(1);
  result.setStatus(schema::RunStatus::OK);
  result.initRecord().setCompleted(static_cast<uint32_t>(requests));
  auto list = result.initRequests(static_cast<unsigned>(requests));
  for (int i = 0; i < requests; ++i) {
    list[i].setIndex(static_cast<uint32_t>(i));
    auto times = list[i].initChunkTimesNs(kChunksPerRequest);
    for (int c = 0; c < kChunksPerRequest; ++c) times.set(c, int64_t{i} * 1000000 + c * 5000);
  }
}

void BM_EncodeResult(benchmark::State& state) {
  capnp::MallocMessageBuilder message;
  BuildResult(message, static_cast<int>(state.range(0)), "bench-0000-00000000");
  size_t bytes = 0;
  for (auto _ : state) {
    zmq::message_t frame = EncodeFrame(message);
    bytes = frame.size();
    benchmark::DoNotOptimize(frame.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["frame_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_EncodeResult)->Arg(100)->Arg(1000)->Arg(10000);

void BM_DecodeAndCopyResult(benchmark::State& state) {
  capnp::MallocMessageBuilder message;
  BuildResult(message, static_cast<int>(state.range(0)), "bench-0000-00000000");
  const zmq::message_t frame = EncodeFrame(message);
  for (auto _ : state) {
    std::unique_ptr<DecodedEnvelope> decoded;
    if (!DecodeFrame(frame, &decoded).ok()) state.SkipWithError("decode failed");
    capnp::MallocMessageBuilder copy;
    copy.setRoot(decoded->envelope().getResult());
    benchmark::DoNotOptimize(copy.getRoot<schema::RunResult>().getRequests().size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * frame.size()));
}
BENCHMARK(BM_DecodeAndCopyResult)->Arg(100)->Arg(1000)->Arg(10000);

void BM_CommitResult(benchmark::State& state) {
  const int requests = static_cast<int>(state.range(0));
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("servesweep-bench-" + std::to_string(::getpid()) + RandomHex(6) + ".db"))
          .string();
  std::unique_ptr<results::ResultsStore> store;
  if (Status s = results::ResultsStore::Open(path, &store); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  // Enough runs for every iteration: a run commits once.
  std::string matrix_text =
      "name: bench\nengine: sim\nmodel: m\nworkload: {input_len: 1, output_len: 1, "
      "num_requests: 1, concurrency: 1}\nrepeats: 20000\n";
  matrix::LoadedMatrix matrix;
  if (Status s = matrix::ExpandMatrix("bench.yaml", matrix_text, &matrix); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  if (Status s = store->InitSweep(matrix.matrix(), matrix.text); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  size_t next = 0;
  for (auto _ : state) {
    state.PauseTiming();
    capnp::MallocMessageBuilder message;
    BuildResult(message, requests, matrix.matrix().getRuns()[next++ % 20000].getRunId());
    auto result = message.getRoot<schema::Envelope>().getResult().asReader();
    state.ResumeTiming();
    bool duplicate = false;
    if (!store->CommitResult(result, true, &duplicate).ok()) state.SkipWithError("commit failed");
  }
  state.counters["requests_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * requests), benchmark::Counter::kIsRate);
  store.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}
BENCHMARK(BM_CommitResult)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace servesweep

BENCHMARK_MAIN();
