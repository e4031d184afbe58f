// Virtual runs (record/virtual_run.h): the load modes run in virtual time as the load generator
// runs them in real time, what the model cannot simulate is refused, and every record says which
// calibration its figures stand on.
#include "record/virtual_run.h"

#include <capnp/message.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "matrix/matrix_loader.h"
#include "workload/load_settings.h"

namespace servesweep::record {
namespace {

Status Expand(const std::string& text, matrix::LoadedMatrix* m) {
  return matrix::ExpandMatrix(std::string(SERVESWEEP_SOURCE_DIR) + "/agent/m.yaml", text, m);
}

// Runs the matrix's first run through the model into *result (status ok expected).
void RunFirst(const std::string& matrix_text, capnp::MallocMessageBuilder* message) {
  matrix::LoadedMatrix m;
  const Status s = Expand(matrix_text, &m);
  ASSERT_TRUE(s.ok()) << s.message();
  auto result = message->initRoot<schema::RunResult>();
  ExecuteVirtualRun(m.matrix().getRuns()[0], "", result);
  ASSERT_EQ(result.getStatus(), schema::RunStatus::OK) << result.getError().cStr();
}

TEST(VirtualRun, RefusesSessions) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setModel("meta-llama/Llama-3.1-8B-Instruct");
  spec.getSim().setHardware("h200");
  spec.getWorkload().setSessions(4);
  SimulatedRun run;
  const Status s = SimulateRun(spec.asReader(), "", &run);
  EXPECT_NE(s.message().find("cannot simulate sessions"), std::string::npos) << s.message();
}

// Duration mode (was refused): a closed loop keeps 4 requests in flight until the window ends;
// requests sent during the warm-up second are flagged and left out of the figures, and the
// window is 5 s.
TEST(VirtualRun, DurationModeRunsItsTimedWindow) {
  capnp::MallocMessageBuilder message;
  RunFirst(R"(name: d
engine: vllm
engine_version: 0.21.0
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload: {input_len: 200, output_len: 100, duration_s: 5, warmup_s: 1, concurrency: 4}
)",
           &message);
  const auto result = message.getRoot<schema::RunResult>().asReader();
  const auto record = result.getRecord();
  EXPECT_DOUBLE_EQ(record.getWindowS(), 5);
  size_t warmup = 0, measured = 0;
  for (const auto r : result.getRequests()) {
    (r.getWarmup() ? warmup : measured)++;
    if (!r.getWarmup()) {
      EXPECT_GE(r.getScheduledNs(), 1'000'000'000) << r.getIndex();
      EXPECT_LT(r.getScheduledNs(), 6'000'000'000) << r.getIndex();
    }
  }
  EXPECT_GT(warmup, 4u);
  EXPECT_EQ(record.getCompleted(), measured);
  // About 4 streams x 5 s / (TTFT + 99 x TPOT) of requests: tens, not the spec's num_requests.
  EXPECT_GT(measured, 20u);
  EXPECT_GT(record.getRunningMax(), 3.5);
  EXPECT_LT(record.getRunningMax(), 4.5);
  // An open loop in duration mode: the Poisson schedule up to the window's end.
  capnp::MallocMessageBuilder open;
  RunFirst(R"(name: d
engine: vllm
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload: {input_len: 200, output_len: 20, duration_s: 10, request_rate: 5, seed: 3}
)",
           &open);
  const auto open_result = open.getRoot<schema::RunResult>().asReader();
  EXPECT_GT(open_result.getRecord().getCompleted(), 30u);
  EXPECT_LT(open_result.getRecord().getCompleted(), 75u);
}

// Trace replay with `concurrency` is a capped open loop in virtual time as in real time: each
// request is due at its trace time, and one due while the cap is reached waits on the client;
// that wait is the record's client queue time (it was lost: every request counted as sent when
// due, i.e. the cap behaved as a closed loop).
TEST(VirtualRun, TraceReplayWithAMaxInFlightQueuesOnTheClient) {
  capnp::MallocMessageBuilder message;
  RunFirst(R"(name: r
engine: vllm
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload:
  trace: ../tests/data/azure_conv_sample.csv
  trace_speedup: 1000
  num_requests: 20
  max_in_flight: 2
)",
           &message);
  const auto result = message.getRoot<schema::RunResult>().asReader();
  const auto record = result.getRecord();
  EXPECT_LE(record.getRunningMax(), 2);
  EXPECT_GT(record.getClientQueueMs().getMedian(), 10) << "requests waited under the cap";
  size_t queued = 0;
  int64_t previous_due = -1;
  for (const auto r : result.getRequests()) {
    EXPECT_GE(r.getStartNs(), r.getScheduledNs());
    queued += r.getStartNs() > r.getScheduledNs();
    EXPECT_GE(r.getScheduledNs(), previous_due);  // due at the trace's (sorted) offsets
    previous_due = r.getScheduledNs();
  }
  EXPECT_GT(queued, 10u);
}

// Each simulated record names its engine profile and calibration: a vLLM run in a profile's
// versions gets that profile; an engine without one, the uncalibrated fallback with its typical
// error.
TEST(VirtualRun, RecordsCarryTheirCalibration) {
  capnp::MallocMessageBuilder vllm;
  RunFirst(R"(name: c
engine: vllm
engine_version: 0.6.0
model: meta-llama/Llama-3.1-70B-Instruct
layout: {tp: 4}
sim: {hardware: h100}
workload: {input_len: 200, output_len: 50, num_requests: 20, concurrency: 4}
)",
           &vllm);
  const auto r = vllm.getRoot<schema::RunResult>().getRecord().asReader();
  EXPECT_EQ(std::string(r.getCalibration()).rfind("vllm-0.6", 0), 0u) << r.getCalibration().cStr();
  EXPECT_GT(r.getCalibrationErrorPct(), 0);
  EXPECT_FALSE(std::string(r.getCalibrationStanding()).empty());
  capnp::MallocMessageBuilder sim;
  RunFirst(R"(name: c
engine: sim
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload: {input_len: 200, output_len: 50, num_requests: 20, concurrency: 4}
)",
           &sim);
  const auto s = sim.getRoot<schema::RunResult>().getRecord().asReader();
  EXPECT_EQ(std::string(s.getCalibration()), "default (uncalibrated)");
  EXPECT_EQ(std::string(s.getCalibrationStanding()).rfind("uncalibrated: ", 0), 0u)
      << s.getCalibrationStanding().cStr();
  EXPECT_GT(s.getCalibrationErrorPct(), 0);
  // vLLM 0.6's profile was fitted on Llama 3.1 8B/70B on A100/H100: Qwen3-8B on an H200 lies
  // outside, and its expected error is at least the model's error where it was not fitted, not
  // the fit's own.
  capnp::MallocMessageBuilder other;
  RunFirst(R"(name: c
engine: vllm
engine_version: 0.6.0
model: Qwen/Qwen3-8B
sim: {hardware: h200}
workload: {input_len: 200, output_len: 50, num_requests: 20, concurrency: 4}
)",
           &other);
  const auto x = other.getRoot<schema::RunResult>().getRecord().asReader();
  EXPECT_EQ(std::string(x.getCalibrationStanding()).rfind("extrapolated: ", 0), 0u)
      << x.getCalibrationStanding().cStr();
  EXPECT_GE(x.getCalibrationErrorPct(), s.getCalibrationErrorPct());
  perfmodel::EngineProfile vllm06;
  ASSERT_TRUE(perfmodel::LoadEngineProfile("vllm-0.6", &vllm06).ok());
  EXPECT_GT(x.getCalibrationErrorPct(), vllm06.calibration.fit_error_pct);
}

// Profiles handed over (a search's learned ones, --engine-profile) cost only the kinds of model
// they are for: a MoE-only profile is passed over for a dense model, which gets the next one that
// covers it, else the shipped choice.
TEST(VirtualRun, GivenProfilesCostOnlyTheirKindOfModel) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setEngine("vllm");
  spec.setEngineVersion("0.8.5");
  spec.setModel("Qwen/Qwen3-8B");
  VirtualRunOptions options;
  perfmodel::EngineProfile moe, any;
  ASSERT_TRUE(perfmodel::LoadEngineProfile("vllm-0.8-moe", &moe).ok());
  moe.name = "learned-moe";
  options.engine_profiles = {moe};
  perfmodel::EngineProfile chosen;
  std::string why;
  ASSERT_TRUE(ChooseEngineProfile(spec.asReader(), options, &chosen, &why).ok());
  EXPECT_EQ(chosen.name, "vllm-0.8");
  any = moe;
  any.name = "learned-any";
  any.architecture = perfmodel::kAnyArchitecture;
  options.engine_profiles = {moe, any};
  ASSERT_TRUE(ChooseEngineProfile(spec.asReader(), options, &chosen, &why).ok());
  EXPECT_EQ(chosen.name, "learned-any");
  spec.setModel("Qwen/Qwen3-235B-A22B-Instruct-2507");
  ASSERT_TRUE(ChooseEngineProfile(spec.asReader(), options, &chosen, &why).ok());
  EXPECT_EQ(chosen.name, "learned-moe");
  options.engine_profiles.clear();
  ASSERT_TRUE(ChooseEngineProfile(spec.asReader(), options, &chosen, &why).ok());
  EXPECT_EQ(chosen.name, "vllm-0.8-moe");
  EXPECT_EQ(why, "");
}

// workload.early_stop in virtual time: a steady closed loop stops once stable, short of its
// num_requests; an open loop far above the engine's rate stops over-saturated with the evidence;
// each record says so, and a phase without early stop runs its full length.
TEST(VirtualRun, EarlyStopCutsThePhaseWhereTheLoadGeneratorWouldStop) {
  const std::string head = R"(name: e
engine: vllm
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
)";
  capnp::MallocMessageBuilder stable;
  RunFirst(head + R"(workload:
  input_len: 200
  output_len: 50
  num_requests: 5000
  concurrency: 8
  early_stop: {stable: {min_requests: 200, window_requests: 50}}
)",
           &stable);
  const auto stable_record = stable.getRoot<schema::RunResult>().getRecord().asReader();
  EXPECT_EQ(stable_record.getStopped(), schema::StopReason::STABLE)
      << stable_record.getStopEvidence().cStr();
  EXPECT_GE(stable_record.getCompleted(), 200u);
  EXPECT_LE(stable_record.getCompleted(), 240u);  // within 20% of the minimum count
  EXPECT_GT(stable_record.getStoppedAtS(), 0);
  EXPECT_EQ(stable.getRoot<schema::RunResult>().getRequests().size(), stable_record.getCompleted());

  capnp::MallocMessageBuilder flooded;
  RunFirst(head + R"(workload:
  input_len: 512
  output_len: 128
  num_requests: 12000
  request_rate: 200
  early_stop: {oversaturated: {min_s: 10, window_s: 20}}
)",
           &flooded);
  const auto flooded_record = flooded.getRoot<schema::RunResult>().getRecord().asReader();
  EXPECT_EQ(flooded_record.getStopped(), schema::StopReason::OVERSATURATED);
  EXPECT_NE(std::string(flooded_record.getStopEvidence()).find("due -> first token grew"),
            std::string::npos)
      << flooded_record.getStopEvidence().cStr();
  EXPECT_LT(flooded_record.getStoppedAtS(), 40);
  EXPECT_LT(flooded_record.getCompleted(), 12000u);

  capnp::MallocMessageBuilder full;
  RunFirst(head + "workload: {input_len: 200, output_len: 50, num_requests: 300, concurrency: 8}\n",
           &full);
  const auto full_record = full.getRoot<schema::RunResult>().getRecord().asReader();
  EXPECT_EQ(full_record.getStopped(), schema::StopReason::NONE);
  EXPECT_EQ(full_record.getCompleted(), 300u);
}

// Multi-LoRA in the model: each simulated request names the adapter the load generator would
// send (the same seeded draw), the record has figures per adapter, and the slots cost what
// vLLM's scheduler makes them cost: one slot for 8 Zipf adapters serialises them (slower than 8
// slots), and 8 slots still pay the adapters' reads and matmuls (slower than the base model).
TEST(VirtualRun, LoraAdaptersAreDrawnAsTheLoadGeneratorDrawsThemAndCostTheirSlots) {
  auto run = [](const std::string& lora, capnp::MallocMessageBuilder* message) {
    RunFirst(fmt::format(R"(name: l
engine: vllm
engine_version: 0.21.0
model: meta-llama/Llama-3.1-8B-Instruct
sim: {{hardware: h100}}
{}
workload: {{input_len: 200, output_len: 100, num_requests: 256, concurrency: 32{}}}
)",
                         lora.empty() ? ""
                                      : "engine_config: {lora: {adapters: {count: 8, "
                                        "name: \"a{i}\", path: \"/w/a{i}\"}, max_loras: " +
                                            lora + "}}",
                         lora.empty() ? "" : ", lora: {choice: zipf, skew: 1.1}"),
             message);
    return message->getRoot<schema::RunResult>().asReader();
  };
  capnp::MallocMessageBuilder one_m, eight_m, base_m;
  const auto one = run("1", &one_m), eight = run("8", &eight_m), base = run("", &base_m);
  // The adapters named: as workload::AdapterOf draws them for the load generator.
  matrix::LoadedMatrix m;
  ASSERT_TRUE(Expand(R"(name: l
engine: vllm
engine_version: 0.21.0
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
engine_config: {lora: {adapters: {count: 8, name: "a{i}", path: "/w/a{i}"}, max_loras: 1}}
workload: {input_len: 200, output_len: 100, num_requests: 256, concurrency: 32,
           lora: {choice: zipf, skew: 1.1}}
)",
                     &m)
                  .ok());
  const workload::LoadSettings load = workload::LoadSettingsFor(m.matrix().getRuns()[0], "");
  size_t named = 0;
  for (const auto r : one.getRequests()) {
    if (r.getWarmup()) continue;
    const int32_t k = workload::AdapterOf(load, r.getIndex());
    ASSERT_GE(k, 0);
    EXPECT_EQ(std::string(r.getAdapter().cStr()), load.adapters[static_cast<size_t>(k)].name)
        << r.getIndex();
    ++named;
  }
  EXPECT_EQ(named, 256u);
  EXPECT_EQ(one.getRecord().getAdapterFigures().size(), 8u);
  const double one_tps = one.getRecord().getOutputThroughput();
  const double eight_tps = eight.getRecord().getOutputThroughput();
  const double base_tps = base.getRecord().getOutputThroughput();
  EXPECT_LT(one_tps, 0.8 * eight_tps) << one_tps << " vs " << eight_tps;
  EXPECT_LT(eight_tps, base_tps);
  EXPECT_GT(eight_tps, 0.5 * base_tps);  // rank 16 on an 8B model: a share, not a multiple
}

}  // namespace
}  // namespace servesweep::record
