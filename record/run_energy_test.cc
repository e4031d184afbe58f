// A run's energy (record/run_energy.h) at its edges: counters give exact joules, power samples
// stand in with their interval, and the figure is invalid (with why) when a GPU of the run is
// missing, a counter went back, the samples are too sparse or too few for the window, the counter
// reads are too slow for the phase, or GPUs on other nodes were not read; other nodes' reads count
// with their own window.
#include "record/run_energy.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::record {
namespace {

constexpr int64_t kS = 1'000'000'000;

EnergyCounterRead Read(int64_t at_ns, std::vector<double> mj, int64_t takes_ns = 10'000'000) {
  EnergyCounterRead read;
  read.started_ns = at_ns - takes_ns;
  read.finished_ns = at_ns;
  for (uint32_t i = 0; i < mj.size(); ++i) {
    read.gpus.push_back({i, "GPU-uuid-" + std::to_string(i), mj[i]});
  }
  return read;
}

// A 10 s phase at [100 s, 110 s], its counters read in the 10 ms before and after it.
EnergyInputs TenSeconds(std::vector<std::string> gpus, std::vector<double> before_mj,
                        std::vector<double> after_mj) {
  EnergyInputs in;
  in.gpus = std::move(gpus);
  in.phase_start_ns = 100 * kS;
  in.phase_end_ns = 110 * kS;
  in.before = Read(in.phase_start_ns, before_mj);
  in.after = Read(in.phase_end_ns + 10'000'000, after_mj);
  return in;
}

TEST(RunEnergy, CountersGiveTheDifferenceOverTheRunsGpusOnly) {
  // GPU 2 is not the run's: its 1 kJ is not counted.
  const RunEnergy e =
      MeasureRunEnergy(TenSeconds({"0", "1"}, {1e6, 2e6, 5e6}, {1.25e6, 2.125e6, 6e6}));
  EXPECT_TRUE(e.valid) << e.invalid_reason;
  EXPECT_DOUBLE_EQ(e.energy_j, 375);
  EXPECT_EQ(e.source, "counter (GPU 0: 250.0 J, GPU 1: 125.0 J)");
  EXPECT_NEAR(e.window_s, 10.01, 1e-9);  // read midpoints: 5 ms before, 15 ms after
  EXPECT_TRUE(std::isnan(e.prefill_j));
  // Named by UUID (CUDA_VISIBLE_DEVICES of UUIDs): the same GPUs.
  const RunEnergy by_uuid =
      MeasureRunEnergy(TenSeconds({"GPU-uuid-1"}, {1e6, 2e6}, {1.25e6, 2.125e6}));
  EXPECT_DOUBLE_EQ(by_uuid.energy_j, 125);
}

TEST(RunEnergy, DisaggregatedRunsSplitPrefillAndDecodeGpus) {
  EnergyInputs in = TenSeconds({"0", "1", "2"}, {0, 0, 0}, {1e6, 2e6, 4e6});
  in.prefill = {true, false, false};
  const RunEnergy e = MeasureRunEnergy(in);
  EXPECT_DOUBLE_EQ(e.prefill_j, 1000);
  EXPECT_DOUBLE_EQ(e.decode_j, 6000);
  EXPECT_DOUBLE_EQ(e.energy_j, 7000);
}

TEST(RunEnergy, AGpuOfTheRunWithoutCounterOrSamplesMakesItInvalid) {
  const RunEnergy e = MeasureRunEnergy(TenSeconds({"0", "1"}, {1e6, NAN}, {2e6, NAN}));
  EXPECT_FALSE(e.valid);
  EXPECT_FALSE(e.known);
  EXPECT_TRUE(std::isnan(e.energy_j));
  EXPECT_NE(e.invalid_reason.find("GPU 1 of the run: no energy counter (not reported) and no "
                                  "power samples"),
            std::string::npos)
      << e.invalid_reason;
  // A GPU nvidia-smi does not list at all, and a failed read that says why.
  EnergyInputs missing = TenSeconds({"0", "7"}, {1e6}, {2e6});
  missing.after.why_none = "nvidia-smi exited 2";
  EXPECT_NE(MeasureRunEnergy(missing).invalid_reason.find("GPU 7 of the run: no energy counter "
                                                          "(nvidia-smi exited 2)"),
            std::string::npos);
}

TEST(RunEnergy, ACounterThatWentBackIsRefused) {
  const RunEnergy e = MeasureRunEnergy(TenSeconds({"0"}, {5e6}, {1e6}));
  EXPECT_FALSE(e.valid);
  EXPECT_NE(e.invalid_reason.find("GPU 0's energy counter went back (5000000 mJ -> 1000000 mJ)"),
            std::string::npos)
      << e.invalid_reason;
}

// The reads' worst case beyond the phase (from the first read's start to the second's end) may be
// 5% of it: 10 s with reads of 0.24 s each passes (0.48 s beyond), of 0.26 s fails (0.52 s).
TEST(RunEnergy, CounterReadsTooSlowForThePhaseMakeItInvalid) {
  for (const auto& [takes_ns, valid] : {std::pair{240'000'000, true}, {260'000'000, false}}) {
    EnergyInputs in = TenSeconds({"0"}, {0}, {1e6});
    in.before = Read(in.phase_start_ns, {0}, takes_ns);
    in.after = Read(in.phase_end_ns + takes_ns, {1e6}, takes_ns);
    const RunEnergy e = MeasureRunEnergy(in);
    EXPECT_EQ(e.valid, valid) << takes_ns << ": " << e.invalid_reason;
    EXPECT_DOUBLE_EQ(e.energy_j, 1000);
    if (!valid) {
      EXPECT_NE(e.invalid_reason.find("the measured phase (10.00 s) is too short for the energy "
                                      "counters"),
                std::string::npos)
          << e.invalid_reason;
    }
  }
}

// Without a counter, the phase's power samples: their mean times its length; at least 5
// intervals, and half the samples the interval promises.
TEST(RunEnergy, PowerSamplesStandInWhenDenseEnough) {
  EnergyInputs in = TenSeconds({"0"}, {NAN}, {NAN});
  for (int64_t t = 0; t <= 10; ++t) in.power_samples.push_back({t * kS, "gpu0.power_w", 300.0 + t});
  in.power_samples.push_back({11 * kS, "gpu0.power_w", 9999});  // after the phase
  in.power_samples.push_back({5 * kS, "gpu1.power_w", 9999});   // another GPU
  const RunEnergy e = MeasureRunEnergy(in);
  EXPECT_TRUE(e.valid) << e.invalid_reason;
  EXPECT_DOUBLE_EQ(e.energy_j, 305.0 * 10);
  EXPECT_DOUBLE_EQ(e.window_s, 10);
  EXPECT_EQ(e.source, "power samples every 1000 ms (GPU 0: 3050.0 J)");
  // Sparse: 4 samples where 10 were due.
  in.power_samples.resize(4);
  const RunEnergy sparse = MeasureRunEnergy(in);
  EXPECT_FALSE(sparse.valid);
  EXPECT_TRUE(sparse.known);
  EXPECT_NE(sparse.invalid_reason.find("4 power sample(s) are too sparse for 10.00 s"),
            std::string::npos)
      << sparse.invalid_reason;
  // A phase of 4 s: shorter than 5 intervals, however many samples.
  in.phase_end_ns = in.phase_start_ns + 4 * kS;
  EXPECT_NE(MeasureRunEnergy(in).invalid_reason.find("is shorter than 5 power sampling intervals "
                                                     "of 1000 ms"),
            std::string::npos);
}

TEST(RunEnergy, GpusOnOtherNodesAreNamedAndTheFigureIsInvalid) {
  EnergyInputs in = TenSeconds({"0"}, {0}, {1e6});
  in.gpus_on_other_nodes = 8;
  const RunEnergy e = MeasureRunEnergy(in);
  EXPECT_FALSE(e.valid);
  EXPECT_DOUBLE_EQ(e.energy_j, 1000);
  EXPECT_EQ(e.invalid_reason, "8 GPU(s) of the run on other nodes are not read");
}

// A multi-node run: the other nodes' GPUs count when their reads came back (timed from the head's
// asking to the answer's arrival), prefill and decode apart across nodes.
TEST(RunEnergy, OtherNodesThatAnsweredCountWithTheirOwnWindow) {
  EnergyInputs in = TenSeconds({"0"}, {0}, {1e6});
  in.prefill = {true};
  in.gpus_on_other_nodes = 2;
  NodeEnergy b{"b",
               {"0", "1"},
               {false, false},
               Read(in.phase_start_ns, {5e6, 0}, 200'000'000),
               Read(in.phase_end_ns + 200'000'000, {5.5e6, 0.25e6}, 200'000'000)};
  in.other_nodes.push_back(b);
  const RunEnergy e = MeasureRunEnergy(in);
  EXPECT_TRUE(e.valid) << e.invalid_reason;
  EXPECT_DOUBLE_EQ(e.energy_j, 1000 + 500 + 250);
  EXPECT_DOUBLE_EQ(e.prefill_j, 1000);
  EXPECT_DOUBLE_EQ(e.decode_j, 750);
  EXPECT_EQ(e.source,
            "counter (GPU 0: 1000.0 J, GPU 0 on node b: 500.0 J, GPU 1 on node b: 250.0 J)");
  EXPECT_NEAR(e.window_s, 10.2, 1e-9);  // node b's, the widest
  // A round trip of 0.3 s at each edge is too uncertain for 10 s (0.6 s > 5%): that node says so.
  in.other_nodes[0].before = Read(in.phase_start_ns, {5e6, 0}, 300'000'000);
  in.other_nodes[0].after = Read(in.phase_end_ns + 300'000'000, {5.5e6, 0.25e6}, 300'000'000);
  const RunEnergy slow = MeasureRunEnergy(in);
  EXPECT_FALSE(slow.valid);
  EXPECT_NE(slow.invalid_reason.find("too short for the energy counters on node b"),
            std::string::npos)
      << slow.invalid_reason;
}

TEST(RunEnergy, ANodeThatDidNotAnswerMakesItInvalidAndSaysWhich) {
  EnergyInputs in = TenSeconds({"0"}, {0}, {1e6});
  in.gpus_on_other_nodes = 3;
  in.other_nodes.push_back(
      {"b", {"0"}, {}, Read(in.phase_start_ns, {0}), Read(in.phase_end_ns, {1e6})});
  in.other_nodes_unread = {
      "node c did not answer the energy read after the measured phase within "
      "12 s"};
  const RunEnergy e = MeasureRunEnergy(in);
  EXPECT_FALSE(e.valid);
  EXPECT_DOUBLE_EQ(e.energy_j, 2000);  // what was read, for the record
  EXPECT_EQ(e.invalid_reason,
            "2 GPU(s) of the run on other nodes are not read: node c did not answer the energy "
            "read after the measured phase within 12 s");
  // A node whose GPU has no counter: that GPU, on that node, is named.
  in.other_nodes[0].after.gpus[0].energy_mj = NAN;
  EXPECT_NE(
      MeasureRunEnergy(in).invalid_reason.find(
          "GPU 0 on node b of the run: no energy counter (not reported) and no power samples"),
      std::string::npos);
}

TEST(RunEnergy, ASimulatedRunIsPricedAtMaxPowerAndNeverValid) {
  const RunEnergy e = EnergyAtMaxPower("h200", 700, 8, 10);
  EXPECT_TRUE(e.known);
  EXPECT_FALSE(e.valid);
  EXPECT_DOUBLE_EQ(e.energy_j, 700 * 8 * 10);
  EXPECT_DOUBLE_EQ(e.window_s, 10);
  EXPECT_EQ(e.source, "model: 8 GPU(s) at h200's max power 700 W (an upper bound)");
  const RunEnergy unknown = EnergyAtMaxPower("gb300", 0, 8, 10);
  EXPECT_FALSE(unknown.known);
  EXPECT_TRUE(std::isnan(unknown.energy_j));
  EXPECT_EQ(unknown.source, "n/a: hardware profile gb300 has no max_power_w");
}

}  // namespace
}  // namespace servesweep::record
