// Length distributions: their moments, bounds and reproducibility, and their expansion into the
// plan of a run.
#include "workload/length_distribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "coordinator/matrix_loader.h"
#include "workload/trace_reader.h"

namespace servesweep::workload {
namespace {

double Mean(const std::vector<uint32_t>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

TEST(LengthDistribution, MomentsBoundsAndSeeds) {
  const auto uniform = SampleLengths({"uniform", 64, 512, 1, 100000, {}, ""}, 20000, 1);
  EXPECT_EQ(*std::min_element(uniform.begin(), uniform.end()), 64u);
  EXPECT_EQ(*std::max_element(uniform.begin(), uniform.end()), 512u);
  EXPECT_NEAR(Mean(uniform), 288, 288 * 0.02);

  const auto normal = SampleLengths({"normal", 1000, 100, 1, 100000, {}, ""}, 20000, 2);
  const double mean = Mean(normal);
  double var = 0;
  for (uint32_t x : normal) var += (x - mean) * (x - mean);
  EXPECT_NEAR(mean, 1000, 5);
  EXPECT_NEAR(std::sqrt(var / normal.size()), 100, 5);

  auto lognormal = SampleLengths({"lognormal", 300, 0.5, 1, 100000, {}, ""}, 20001, 3);
  std::nth_element(lognormal.begin(), lognormal.begin() + 10000, lognormal.end());
  EXPECT_NEAR(lognormal[10000], 300, 15);  // the median

  const auto clamped = SampleLengths({"normal", 10, 100, 5, 20, {}, ""}, 1000, 4);
  EXPECT_EQ(*std::min_element(clamped.begin(), clamped.end()), 5u);
  EXPECT_EQ(*std::max_element(clamped.begin(), clamped.end()), 20u);
  EXPECT_EQ(SampleLengths({"normal", 500, 50, 1, 1000, {}, ""}, 50, 9),
            SampleLengths({"normal", 500, 50, 1, 1000, {}, ""}, 50, 9));
  EXPECT_EQ(Describe({"uniform", 64, 512, 1, 10, {}, ""}), "uniform:64-512");
}

TEST(LengthDistribution, MatrixSamplesLengthsIntoThePlan) {
  coordinator::LoadedMatrix m;
  Status s = coordinator::ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload:
  input_len: {distribution: uniform, low: 10, high: 20}
  output_len: 4
  num_requests: 50
  concurrency: 2
  seed: 5
)",
                                       &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto w = m.matrix().getRuns()[0].getWorkload();
  ASSERT_EQ(w.getPlan().size(), 50u);
  EXPECT_FALSE(w.getReplayArrivals());
  std::vector<uint32_t> lengths;
  for (auto planned : w.getPlan()) {
    lengths.push_back(planned.getInputLenTok());
    EXPECT_EQ(planned.getOutputLenTok(), 4u);
  }
  EXPECT_EQ(lengths, SampleLengths({"uniform", 10, 20, 1, 1048576, {}, ""}, 50, 5 * 2 + 1));
  EXPECT_NEAR(w.getInputLenTok(), 15, 1.5);

  coordinator::LoadedMatrix bad;
  s = coordinator::ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload: {input_len: {distribution: zipf, low: 1, high: 2}, output_len: 4, num_requests: 5, concurrency: 1}
)",
                                &bad);
  EXPECT_NE(s.message().find("expected 'input_len.distribution' to be uniform, normal, lognormal "
                             "or empirical, found 'zipf'"),
            std::string::npos)
      << s.message();
  coordinator::LoadedMatrix missing;
  s = coordinator::ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload: {input_len: {distribution: normal, mean: 100}, output_len: 4, num_requests: 5, concurrency: 1}
)",
                                &missing);
  EXPECT_NE(s.message().find("expected 'input_len.std' for a normal distribution, found none"),
            std::string::npos)
      << s.message();
}

TEST(LengthDistribution, EmpiricalDrawsTheTracesOwnLengths) {
  // Observations 1, 10, 100 (and 1000 twice): draws are only ever those, in about their shares.
  const auto draws =
      SampleLengths({"empirical", 0, 0, 1, 1048576, {1, 10, 100, 1000, 1000}, "t"}, 20000, 9);
  std::map<uint32_t, int> counts;
  for (uint32_t x : draws) ++counts[x];
  ASSERT_EQ(counts.size(), 4u);
  EXPECT_NEAR(counts[1000] / 20000.0, 0.4, 0.02);
  EXPECT_NEAR(counts[1] / 20000.0, 0.2, 0.02);
  EXPECT_EQ(draws, SampleLengths({"empirical", 0, 0, 1, 1048576, {1, 10, 100, 1000, 1000}, "t"},
                                 20000, 9));
  // Clamped like the others.
  for (uint32_t x : SampleLengths({"empirical", 0, 0, 5, 500, {1, 1000}, "t"}, 100, 1)) {
    EXPECT_TRUE(x == 5 || x == 500) << x;
  }
  EXPECT_EQ(Describe({"empirical", 0, 0, 1, 1, {3, 4}, "azure.csv"}), "empirical:azure.csv(n=2)");
}

TEST(LengthDistribution, MatrixDrawsEmpiricalLengthsFromATrace) {
  coordinator::LoadedMatrix m;
  Status s = coordinator::ExpandMatrix(SERVESWEEP_SOURCE_DIR "/tests/data/m.yaml", R"(name: t
engine: sim
model: m
workload:
  input_len: {distribution: empirical, trace: azure_conv_sample.csv}
  output_len: {distribution: empirical, trace: azure_conv_sample.csv, max: 100}
  num_requests: 200
  concurrency: 2
  seed: 5
)",
                                       &m);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<TraceRequest> trace;
  ASSERT_TRUE(ReadTrace(SERVESWEEP_SOURCE_DIR "/tests/data/azure_conv_sample.csv",
                        TraceFormat::kAzureCsv, 0, &trace)
                  .ok());
  std::set<uint32_t> inputs, outputs;
  for (const auto& r : trace) {
    inputs.insert(r.input_len_tok);
    outputs.insert(std::min<uint32_t>(r.output_len_tok, 100));
  }
  const auto w = m.matrix().getRuns()[0].getWorkload();
  ASSERT_EQ(w.getPlan().size(), 200u);
  std::set<uint32_t> seen;
  for (auto planned : w.getPlan()) {
    EXPECT_TRUE(inputs.count(planned.getInputLenTok())) << planned.getInputLenTok();
    EXPECT_TRUE(outputs.count(planned.getOutputLenTok())) << planned.getOutputLenTok();
    seen.insert(planned.getInputLenTok());
  }
  EXPECT_GT(seen.size(), inputs.size() / 2);  // 200 draws from 20 observations hit most of them

  s = coordinator::ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload: {input_len: {distribution: empirical}, output_len: 4, num_requests: 5, concurrency: 1}
)",
                                &m);
  EXPECT_NE(s.message().find("expected 'input_len.trace' (the trace whose lengths to draw from)"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace servesweep::workload
