// The workload keys of a matrix expanded into each run's plan: length distributions (sampled
// and empirical), quality task sets, traces (workload/ reads them; the matrix expands them).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "matrix/matrix_loader.h"
#include "workload/length_distribution.h"
#include "workload/load_settings.h"
#include "workload/task_set.h"
#include "workload/trace_reader.h"

namespace servesweep::matrix {
namespace {

std::string TempFile(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("servesweep-matrix-workload-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

// An axis's fixed length replaces the workload's distribution (the run is what its label says),
// and an axis's distribution replaces the workload's fixed length.
TEST(MatrixWorkload, AnAxisLengthReplacesTheWorkloadsOfTheOtherForm) {
  LoadedMatrix m;
  Status s = ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload:
  input_len: {distribution: lognormal, median: 131, sigma: 1.0, min: 4, max: 1024}
  output_len: 8
  num_requests: 20
  concurrency: 2
zip:
  - input_len: [3000, 400]
    output_len: [{distribution: uniform, low: 10, high: 20}, 7]
)",
                          &m);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(m.matrix().getRuns().size(), 2u);
  const auto sampled = m.matrix().getRuns()[0].getWorkload();
  ASSERT_EQ(sampled.getPlan().size(), 20u);
  std::set<uint32_t> outputs;
  for (auto planned : sampled.getPlan()) {
    EXPECT_EQ(planned.getInputLenTok(), 3000u);
    outputs.insert(planned.getOutputLenTok());
  }
  EXPECT_GT(outputs.size(), 1u);
  EXPECT_GE(*outputs.begin(), 10u);
  EXPECT_LE(*outputs.rbegin(), 20u);
  // Fixed lengths both: no plan to sample, the run's own lengths.
  const auto fixed = m.matrix().getRuns()[1].getWorkload();
  EXPECT_EQ(fixed.getPlan().size(), 0u);
  EXPECT_EQ(fixed.getInputLenTok(), 400u);
  EXPECT_EQ(fixed.getOutputLenTok(), 7u);
  EXPECT_EQ(fixed.getInputLenDistribution().getKind(), "");
}

TEST(MatrixWorkload, SamplesLengthsIntoThePlan) {
  LoadedMatrix m;
  Status s = ExpandMatrix("m.yaml", R"(name: t
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
  EXPECT_EQ(lengths,
            workload::SampleLengths({"uniform", 10, 20, 1, 1048576, {}, ""}, 50, 5 * 2 + 1));
  EXPECT_NEAR(w.getInputLenTok(), 15, 1.5);

  LoadedMatrix bad;
  s = ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload: {input_len: {distribution: zipf, low: 1, high: 2}, output_len: 4, num_requests: 5, concurrency: 1}
)",
                   &bad);
  EXPECT_NE(s.message().find("expected 'input_len.distribution' to be uniform, normal, lognormal "
                             "or empirical, found 'zipf'"),
            std::string::npos)
      << s.message();
  LoadedMatrix missing;
  s = ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload: {input_len: {distribution: normal, mean: 100}, output_len: 4, num_requests: 5, concurrency: 1}
)",
                   &missing);
  EXPECT_NE(s.message().find("expected 'input_len.std' for a normal distribution, found none"),
            std::string::npos)
      << s.message();
}

TEST(MatrixWorkload, DrawsEmpiricalLengthsFromATrace) {
  LoadedMatrix m;
  Status s = ExpandMatrix(SERVESWEEP_SOURCE_DIR "/tests/data/m.yaml", R"(name: t
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
  std::vector<workload::TraceRequest> trace;
  ASSERT_TRUE(workload::ReadTrace(SERVESWEEP_SOURCE_DIR "/tests/data/azure_conv_sample.csv",
                                  workload::TraceFormat::kAzureCsv, 0, &trace)
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

  s = ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload: {input_len: {distribution: empirical}, output_len: 4, num_requests: 5, concurrency: 1}
)",
                   &m);
  EXPECT_NE(s.message().find("expected 'input_len.trace' (the trace whose lengths to draw from)"),
            std::string::npos)
      << s.message();
}

TEST(MatrixWorkload, ExpandsTheTaskSetIntoEveryRun) {
  const std::string base = R"(name: t
engine: sim
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3, concurrency: 1}
)";
  LoadedMatrix m;
  ASSERT_TRUE(ExpandMatrix("m.yaml",
                           base + "quality: {task_set: arithmetic, count: 5, seed: 3, "
                                  "margin: 0.02}\naxes:\n  sim: [{answer_accuracy: "
                                  "1}, {answer_accuracy: 0.5}]\n",
                           &m)
                  .ok());
  const auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 2u);
  const auto expected = workload::GenerateArithmeticTasks(5, 3);
  for (auto run : runs) {
    const auto q = run.getQuality();
    EXPECT_EQ(q.getTaskSet(), "arithmetic");
    EXPECT_TRUE(q.getNumericAnswers());
    EXPECT_DOUBLE_EQ(q.getMarginAccuracy(), 0.02);
    EXPECT_EQ(q.getMaxTokens(), 16u);
    ASSERT_EQ(q.getTasks().size(), 5u);
    EXPECT_EQ(q.getTasks()[4].getPrompt(), expected[4].prompt);
    EXPECT_EQ(q.getTasks()[4].getAnswer(), expected[4].answer);
  }
  EXPECT_DOUBLE_EQ(runs[0].getSim().getAnswerAccuracy(), 1);
  EXPECT_DOUBLE_EQ(runs[1].getSim().getAnswerAccuracy(), 0.5);

  // A JSONL file relative to the matrix.
  const std::string tasks = TempFile("qa.jsonl", "{\"prompt\": \"p\", \"answer\": \"a\"}\n");
  const std::string matrix_path =
      (std::filesystem::path(tasks).parent_path() / "matrix.yaml").string();
  LoadedMatrix j;
  ASSERT_TRUE(ExpandMatrix(matrix_path, base + "quality: {task_set: qa.jsonl}\n", &j).ok());
  EXPECT_EQ(j.matrix().getRuns()[0].getQuality().getTaskSet(), "jsonl:qa.jsonl");
  EXPECT_FALSE(j.matrix().getRuns()[0].getQuality().getNumericAnswers());
  EXPECT_EQ(j.matrix().getRuns()[0].getQuality().getTasks().size(), 1u);

  // Errors: position, expected, found.
  auto error = [&](const std::string& extra) {
    LoadedMatrix bad;
    const Status s = ExpandMatrix(matrix_path, base + extra, &bad);
    return s.ok() ? std::string("ok") : s.message();
  };
  EXPECT_NE(error("quality: {task_set: arithmetic, cout: 5}\n")
                .find("unknown key 'cout' in quality (did you mean 'count'?)"),
            std::string::npos);
  EXPECT_NE(error("quality: {count: 5}\n").find("expected 'task_set' in 'quality'"),
            std::string::npos);
  EXPECT_NE(error("quality: {task_set: tasks.txt}\n").find("found 'tasks.txt'"), std::string::npos);
  EXPECT_NE(error("quality: {task_set: missing.jsonl}\n").find("missing.jsonl: cannot open"),
            std::string::npos);
  TempFile("broken.jsonl", "{\"prompt\": \"p\", \"answer\": \"a\"}\n[1]\n");
  EXPECT_NE(
      error("quality: {task_set: broken.jsonl}\n").find("broken.jsonl:2: expected a JSON object"),
      std::string::npos);
  EXPECT_NE(error("sim: {answer_accuracy: 1.5}\n").find("probability in [0, 1], found 1.5"),
            std::string::npos);
}

TEST(MatrixWorkload, QualityGateExampleExpands) {
  LoadedMatrix m;
  const Status s = LoadMatrixFile(SERVESWEEP_SOURCE_DIR "/examples/quality-gate.yaml", &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].getQuality().getTasks().size(), 50u);
  EXPECT_DOUBLE_EQ(runs[1].getSim().getAnswerAccuracy(), 0.5);
  EXPECT_EQ(runs[0].getCompareGroup(), runs[1].getCompareGroup());
}

TEST(MatrixWorkload, ExpandsATraceIntoThePlan) {
  LoadedMatrix m;
  Status s = ExpandMatrix(SERVESWEEP_SOURCE_DIR "/examples/m.yaml", R"(name: t
engine: sim
model: m
workload: {trace: ../tests/data/azure_conv_sample.csv, trace_speedup: 2, num_requests: 4}
)",
                          &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto w = m.matrix().getRuns()[0].getWorkload();
  ASSERT_EQ(w.getPlan().size(), 4u);
  EXPECT_EQ(w.getPlan()[1].getOffsetNs(), 4'314'579'000 / 2);
  EXPECT_EQ(w.getPlan()[2].getInputLenTok(), 879u);
  EXPECT_EQ(w.getInputLenTok(), (374u + 396 + 879 + 91 + 2) / 4);  // rounded mean
  EXPECT_EQ(w.getTrace(), "azure:azure_conv_sample.csv");
  EXPECT_EQ(w.getName(), "trace-azure_conv_sample");

  LoadedMatrix too_many;
  s = ExpandMatrix(SERVESWEEP_SOURCE_DIR "/examples/m.yaml", R"(name: t
engine: sim
model: m
workload: {trace: ../tests/data/azure_conv_sample.csv, num_requests: 50}
)",
                   &too_many);
  EXPECT_NE(s.message().find("azure_conv_sample.csv: expected at least 50 requests (num_requests), "
                             "found 20"),
            std::string::npos)
      << s.message();
}

// `prefix_hit_rate`: one shared prefix per prompt in whole cache blocks of the engine, primed
// by the warm-up; refused at its place where the blocks, the cache or the warm-up cannot give it.
TEST(MatrixWorkload, APrefixHitRateBecomesOneSharedPrefixInTheEnginesBlocks) {
  LoadedMatrix m;
  Status s = ExpandMatrix("m.yaml", R"(name: t
engine: vllm
model: m
workload: {input_len: 1000, output_len: 4, num_requests: 3, concurrency: 1, warmup_requests: 1, prefix_hit_rate: 0.5}
)",
                          &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto w = m.matrix().getRuns()[0].getWorkload();
  ASSERT_EQ(w.getPlan().size(), 3u);
  for (auto p : w.getPlan()) {
    EXPECT_EQ(p.getPrefixLenTok(), 496u);  // 31 of vLLM's 16-token blocks: 49.6%
    EXPECT_EQ(p.getPrefixBlocks()[0], w.getPlan()[0].getPrefixBlocks()[0]);  // one prefix
  }
  // The warm-up sends that prefix (with prompts of its own after it).
  const workload::LoadSettings load =
      workload::LoadSettingsFor(m.matrix().getRuns()[0], "http://x");
  const workload::LoadSettings warmup = workload::WarmupLoadSettings(load);
  ASSERT_EQ(warmup.plan.size(), 1u);
  EXPECT_EQ(warmup.plan[0].prefix_len_tok, 496u);
  EXPECT_EQ(warmup.plan[0].prefix_blocks, load.plan[0].prefix_blocks);
  EXPECT_TRUE(workload::ValidateLoadSettings(warmup, nullptr).ok());

  // The emulator's model caches 512-token blocks: 1,000-token prompts allow 0 or 51.2%.
  LoadedMatrix bad;
  s = ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
sim: {hardware: h200, model_profile: llama-3.1-8b}
workload:
  input_len: 1000
  output_len: 4
  num_requests: 3
  concurrency: 1
  warmup_requests: 1
  prefix_hit_rate: 0.3
)",
                   &bad);
  EXPECT_EQ(s.message(),
            "m.yaml:11:20: prefix_hit_rate 0.3 cannot be set within 5 points with 512-token cache "
            "blocks: the prompts allow 51.2%; expected input lengths of at least 5120 tokens "
            "(enough for any rate) or a rate those blocks allow (engine 'sim'; input_len 1000)");
  // Each refusal at its own cause: {engine and its keys, workload keys beyond the lengths, what
  // the message must say}.
  const struct {
    const char* engine;
    const char* workload;
    const char* says;
  } refused[] = {
      {"engine: sim", "warmup_requests: 1, prefix_hit_rate: 0.5", "found engine 'sim' without one"},
      {"engine: vllm", "prefix_hit_rate: 0.5",
       "expected 'warmup_requests' >= 1 with 'prefix_hit_rate'"},
      {"engine: vllm", "warmup_requests: 1, prefix_hit_rate: 1",
       "expected 'prefix_hit_rate' in [0, 1)"},
      {"engine: vllm",
       "warmup_requests: 1, prefix_hit_rate: 0.5, shared_prefix: {groups: 2, prefix_len: 100}",
       "expected 'prefix_hit_rate' without 'shared_prefix'"},
      {"engine: vllm\nengine_config: {prefix_caching: off}",
       "warmup_requests: 1, prefix_hit_rate: 0.5", "engine_config.prefix_caching: off"},
  };
  for (const auto& c : refused) {
    s = ExpandMatrix(
        "m.yaml",
        fmt::format("name: t\n{}\nmodel: m\nworkload: {{input_len: 1000, output_len: 4, "
                    "num_requests: 3, concurrency: 1, {}}}\n",
                    c.engine, c.workload),
        &bad);
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.workload << ": " << s.message();
  }
}

// Multi-LoRA: the adapters (a list, or a count with {i} patterns) and the engine's slots in the
// engine configuration (so a kept engine serves only runs with the same adapters); the choice in
// the workload, becoming the load settings' weights and each engine's request naming; a trace's
// adapter names kept per request. Each refusal at its place, saying what was expected.
TEST(MatrixWorkload, LoraAdaptersAndTheirChoiceReachTheRunAndTheLoad) {
  LoadedMatrix m;
  Status s = ExpandMatrix("m.yaml", R"(name: t
engine: sglang
model: base
engine_config:
  lora: {adapters: {count: 3, name: "a{i}", path: "/w/a{i}"}, max_loras: 2, max_rank: 16,
         backend: triton}
workload: {input_len: 8, output_len: 4, num_requests: 3, concurrency: 1,
           lora: {choice: zipf, skew: 1.1}}
axes: {concurrency: [1, 2]}
)",
                          &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto run = m.matrix().getRuns()[0];
  const auto adapters = run.getEngineConfig().getLoraAdapters();
  ASSERT_EQ(adapters.size(), 3u);
  EXPECT_EQ(std::string(adapters[2].getName()), "a3");
  EXPECT_EQ(std::string(adapters[2].getPath()), "/w/a3");
  EXPECT_EQ(run.getEngineConfig().getMaxLoras(), 2u);
  EXPECT_EQ(std::string(run.getEngineConfiguration()),
            std::string(m.matrix().getRuns()[1].getEngineConfiguration()));
  const workload::LoadSettings load = workload::LoadSettingsFor(run, "http://x");
  ASSERT_EQ(load.adapters.size(), 3u);
  EXPECT_EQ(load.adapters[0].model, "base:a1");
  ASSERT_EQ(load.adapter_cumulative.size(), 3u);
  EXPECT_GT(load.adapter_cumulative[0], 0.45);  // 1 / (1 + 2^-1.1 + 3^-1.1) = 0.52

  // A trace's adapter per request.
  const std::string trace =
      TempFile("lora.jsonl",
               R"({"timestamp": 0, "input_length": 8, "output_length": 2, "adapter": "a2"}
{"timestamp": 5, "input_length": 8, "output_length": 2}
)");
  s = ExpandMatrix("m.yaml",
                   fmt::format(R"(name: t
engine: vllm
model: base
engine_config: {{lora: {{adapters: [{{name: a1, path: /w/1}}, {{name: a2, path: /w/2}}]}}}}
workload: {{trace: {}, num_requests: 2, lora: {{choice: trace}}}}
)",
                               trace),
                   &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const workload::LoadSettings replay = workload::LoadSettingsFor(m.matrix().getRuns()[0], "");
  ASSERT_EQ(replay.plan.size(), 2u);
  EXPECT_TRUE(replay.adapters_from_plan);
  EXPECT_EQ(replay.plan[0].adapter, 1);
  EXPECT_EQ(replay.plan[1].adapter, -1);

  const struct {
    const char* keys;
    const char* says;
  } refused[] = {
      {"workload: {num_requests: 2, lora: {choice: uniform}}",
       "m.yaml:4:35: expected engine_config.lora.adapters for 'lora: {choice: uniform}'"},
      {"engine_config: {lora: {adapters: [{name: a, path: /p}]}}\nworkload: {num_requests: 2, "
       "lora: {choice: zipf, skew: 0}}",
       "expected 'skew' > 0"},
      {"engine_config: {lora: {adapters: [{name: a, path: /p}]}}\nworkload: {num_requests: 2, "
       "lora: {choice: uniform, skew: 2}}",
       "expected 'skew' only with choice: zipf"},
      {"engine_config: {lora: {adapters: [{name: a, path: /p}, {name: a, path: /q}]}}",
       "expected distinct adapter names, found 'a' twice"},
      {"engine_config: {lora: {adapters: [{name: 'x:y', path: /p}]}}",
       "expected adapter names without ':'"},
      {"engine_config: {lora: {adapters: {count: 2, path: /p}}}",
       "expected '{i}' (the adapter's number)"},
      {"engine_config: {lora: {max_loras: 2}}", "expected 'adapters' in 'engine_config.lora'"},
      {"engine_config: {lora: {adapters: [{name: a, path: /p}]}}\nworkload: {num_requests: 2, "
       "lora: {choice: trace}}",
       "expected a 'trace' with an adapter per request"},
  };
  LoadedMatrix bad;
  for (const auto& c : refused) {
    s = ExpandMatrix("m.yaml", fmt::format("name: t\nengine: vllm\nmodel: m\n{}\n", c.keys), &bad);
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.keys << ": " << s.message();
  }
}

}  // namespace
}  // namespace servesweep::matrix
