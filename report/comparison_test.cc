// Matched comparisons: pairing by load point, conditions that must match, varied axes, and
// verdicts over repeats (report/comparison.h).
#include "report/comparison.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace servesweep::report {
namespace {

std::vector<Field> Conditions(const std::string& input_len = "fixed:128") {
  return {{"checkpoint.model", "m"}, {"workload.input_len", input_len}, {"slo.ttft_ms", "100"}};
}

ComparedRun MakeRun(const std::string& label, const std::string& load_point,
                    const std::string& engine, double ttft_ms, double throughput,
                    std::vector<Field> conditions = Conditions()) {
  ComparedRun run;
  run.run_id = label;
  run.label = label;
  run.ok = true;
  run.conditions = std::move(conditions);
  run.system = {{"engine", engine}, {"layout.tp", "1"}};
  run.load_point = load_point;
  run.figures = {{"ttft_median_ms", ttft_ms}, {"request_throughput", throughput}};
  return run;
}

const ComparedFigure& Figure(const ComparedPair& pair, const std::string& column) {
  for (const auto& f : pair.figures) {
    if (f.column == column) return f;
  }
  ADD_FAILURE() << "no figure " << column;
  static ComparedFigure none;
  return none;
}

TEST(Comparison, RepeatsGiveMedianRangeAndANoiseVerdict) {
  // A: ttft 10, 12, 11 -> median 11 [10..12]; B: 20, 22 -> 21 [20..22]: no overlap, B worse.
  std::vector<ComparedRun> a = {MakeRun("c=4 repeat=0", "concurrency 4", "vllm", 10, 100),
                                MakeRun("c=4 repeat=1", "concurrency 4", "vllm", 12, 104),
                                MakeRun("c=4 repeat=2", "concurrency 4", "vllm", 11, 98)};
  std::vector<ComparedRun> b = {MakeRun("c=4 repeat=0", "concurrency 4", "sglang", 20, 101),
                                MakeRun("c=4 repeat=1", "concurrency 4", "sglang", 22, 103)};
  Comparison c;
  ASSERT_TRUE(CompareRuns(a, b, &c).ok());
  ASSERT_EQ(c.pairs.size(), 1u);
  EXPECT_TRUE(c.matched());
  const auto& ttft = Figure(c.pairs[0], "ttft_median_ms");
  EXPECT_EQ(ttft.a.runs, 3u);
  EXPECT_DOUBLE_EQ(ttft.a.median, 11);
  EXPECT_DOUBLE_EQ(ttft.a.min, 10);
  EXPECT_DOUBLE_EQ(ttft.a.max, 12);
  EXPECT_DOUBLE_EQ(ttft.b.median, 21);
  EXPECT_NEAR(ttft.change_pct, (21.0 - 11) / 11 * 100, 1e-9);
  EXPECT_EQ(ttft.verdict.Text(), "B worse");
  // Throughput: A 98..104, B 101..103 overlap: within noise, even though B's median is higher.
  const auto& tput = Figure(c.pairs[0], "request_throughput");
  EXPECT_DOUBLE_EQ(tput.b.median, 102);
  EXPECT_EQ(tput.verdict.Text(), "within noise");
  ASSERT_EQ(c.pairs[0].varied.size(), 1u);
  EXPECT_EQ(c.pairs[0].varied[0], "engine: 'vllm' vs 'sglang'");
  // A figure nobody measured says so.
  EXPECT_EQ(Figure(c.pairs[0], "goodput").verdict.Text(), "not measured");
}

TEST(Comparison, SingleRunsCannotTellNoise) {
  Comparison c;
  ASSERT_TRUE(CompareRuns({MakeRun("c=1", "concurrency 1", "vllm", 10, 5)},
                          {MakeRun("c=1", "concurrency 1", "vllm", 8, 5)}, &c)
                  .ok());
  EXPECT_EQ(Figure(c.pairs[0], "ttft_median_ms").verdict.Text(),
            "B better, noise unknown (<2 repeats)");
  EXPECT_EQ(Figure(c.pairs[0], "request_throughput").verdict.Text(), "same");
  EXPECT_NE(RenderComparisonText(c, "a", "b").find("a repeatability check"), std::string::npos);
}

TEST(Comparison, EnergyIsComparedOnlyWhereItIsValid) {
  auto with_energy = [](const std::string& engine, double j_per_tok, bool valid) {
    ComparedRun run = MakeRun("c=1", "concurrency 1", engine, 10, 5);
    run.figures["energy_per_output_tok_j"] = j_per_tok;
    run.figures["energy_valid"] = valid ? 1 : 0;
    return run;
  };
  Comparison c;
  ASSERT_TRUE(
      CompareRuns({with_energy("vllm", 0.5, true)}, {with_energy("sglang", 0.4, true)}, &c).ok());
  const auto& energy = Figure(c.pairs[0], "energy_per_output_tok_j");
  EXPECT_DOUBLE_EQ(energy.a.median, 0.5);
  EXPECT_DOUBLE_EQ(energy.b.median, 0.4);
  EXPECT_EQ(energy.verdict.Text(), "B better, noise unknown (<2 repeats)");
  // B's figure misses a GPU: recorded, not compared.
  ASSERT_TRUE(
      CompareRuns({with_energy("vllm", 0.5, true)}, {with_energy("sglang", 0.1, false)}, &c).ok());
  EXPECT_EQ(Figure(c.pairs[0], "energy_per_output_tok_j").b.runs, 0u);
  EXPECT_EQ(Figure(c.pairs[0], "energy_per_output_tok_j").verdict.Text(), "not measured");
}

TEST(Comparison, OneRunIsJudgedByTheOtherSidesRepeatRange) {
  // A: ttft 10, 12, 11 -> [10..12]. A single B run inside that range is within noise; outside
  // it, the direction with the caveat.
  const std::vector<ComparedRun> a = {MakeRun("c=1 repeat=0", "concurrency 1", "vllm", 10, 100),
                                      MakeRun("c=1 repeat=1", "concurrency 1", "vllm", 12, 104),
                                      MakeRun("c=1 repeat=2", "concurrency 1", "vllm", 11, 98)};
  Comparison c;
  ASSERT_TRUE(CompareRuns(a, {MakeRun("c=1", "concurrency 1", "vllm", 11.7, 110)}, &c).ok());
  EXPECT_EQ(Figure(c.pairs[0], "ttft_median_ms").verdict.Text(), "within noise");
  EXPECT_EQ(Figure(c.pairs[0], "request_throughput").verdict.Text(),
            "B better, outside A's range (B: 1 run)");
  ASSERT_TRUE(CompareRuns({MakeRun("c=1", "concurrency 1", "vllm", 9, 101)}, a, &c).ok());
  EXPECT_EQ(Figure(c.pairs[0], "ttft_median_ms").verdict.Text(),
            "B worse, outside B's range (A: 1 run)");
  EXPECT_EQ(Figure(c.pairs[0], "request_throughput").verdict.Text(), "within noise");
}

TEST(Comparison, DifferentConditionsAreListedAndUnmatched) {
  Comparison c;
  ASSERT_TRUE(
      CompareRuns({MakeRun("c=1", "concurrency 1", "vllm", 10, 5)},
                  {MakeRun("c=1", "concurrency 1", "sglang", 8, 5, Conditions("fixed:256"))}, &c)
          .ok());
  EXPECT_FALSE(c.matched());
  ASSERT_EQ(c.pairs[0].mismatches.size(), 1u);
  EXPECT_EQ(c.pairs[0].mismatches[0], "workload.input_len: 'fixed:128' vs 'fixed:256'");
  const std::string text = RenderComparisonText(c, "a", "b");
  EXPECT_NE(text.find("NOT matched"), std::string::npos);
  EXPECT_NE(text.find("condition differs: workload.input_len"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(RenderComparisonJson(c, "a", "b"))["matched"].get<bool>());
}

TEST(Comparison, MoreThanOneVariedAxisIsWarnedAbout) {
  auto b = MakeRun("c=1", "concurrency 1", "sglang", 8, 5);
  b.system[1].value = "2";  // tp differs too
  Comparison c;
  ASSERT_TRUE(CompareRuns({MakeRun("c=1", "concurrency 1", "vllm", 10, 5)}, {b}, &c).ok());
  EXPECT_TRUE(c.matched());
  const std::string text = RenderComparisonText(c, "a", "b");
  EXPECT_NE(text.find("varied: engine, layout.tp"), std::string::npos) << text;
  EXPECT_NE(text.find("warning: 2 axes vary at once"), std::string::npos) << text;
}

TEST(Comparison, AnEnginesVersionGoesWithTheEngine) {
  auto a = MakeRun("c=1", "concurrency 1", "vllm", 10, 5);
  auto b = MakeRun("c=1", "concurrency 1", "sglang", 8, 5);
  a.system.push_back({"engine.version", "0.33.0"});
  b.system.push_back({"engine.version", "0.5.23"});
  Comparison c;
  ASSERT_TRUE(CompareRuns({a}, {b}, &c).ok());
  const std::string text = RenderComparisonText(c, "a", "b");
  EXPECT_NE(text.find("varied: engine\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("warning"), std::string::npos) << text;
  // The same version change without an engine change is an axis of its own.
  b.system[0].value = "vllm";
  ASSERT_TRUE(CompareRuns({a}, {b}, &c).ok());
  EXPECT_NE(RenderComparisonText(c, "a", "b").find("varied: engine.version\n"), std::string::npos);
}

TEST(Comparison, AComparedLayoutBringsItsOwnGpuCount) {
  auto gpus = [](const std::string& count) {
    auto c = Conditions();
    c.push_back({"gpus.count", count});
    return c;
  };
  auto b = MakeRun("c=1", "concurrency 1", "vllm", 8, 5, gpus("2"));
  Comparison c;
  ASSERT_TRUE(
      CompareRuns({MakeRun("c=1", "concurrency 1", "vllm", 10, 5, gpus("1"))}, {b}, &c).ok());
  ASSERT_EQ(c.pairs[0].mismatches.size(), 1u);  // same layout, other GPU count: a mismatch
  EXPECT_EQ(c.pairs[0].mismatches[0], "gpus.count: '1' vs '2'");
  b.system[1].value = "2";  // tp 1 -> 2
  ASSERT_TRUE(
      CompareRuns({MakeRun("c=1", "concurrency 1", "vllm", 10, 5, gpus("1"))}, {b}, &c).ok());
  EXPECT_TRUE(c.matched());
  EXPECT_EQ(c.pairs[0].varied[0], "layout.tp: '1' vs '2'");
}

// A managed endpoint's GPUs and layout are not known: neither is a mismatch nor a varied axis
// of its own, and the comparison says so and points at the costs.
TEST(Comparison, AManagedEndpointsGpusAndLayoutAreNotKnown) {
  auto gpus = [](const std::string& model, const std::string& count) {
    auto c = Conditions();
    c.push_back({"gpus.model", model});
    c.push_back({"gpus.count", count});
    return c;
  };
  auto self_hosted = MakeRun("sim", "concurrency 8", "sim", 70, 18, gpus("NVIDIA H200", "4"));
  self_hosted.system[1].value = "4";
  auto managed = MakeRun("external", "concurrency 8", "external", 300, 4, gpus("emulated", "1"));
  managed.managed_endpoint = true;
  Comparison c;
  ASSERT_TRUE(CompareRuns({self_hosted}, {managed}, &c).ok());
  EXPECT_TRUE(c.matched());
  ASSERT_EQ(c.pairs[0].varied.size(), 1u);
  EXPECT_EQ(c.pairs[0].varied[0], "engine: 'sim' vs 'external'");
  const std::string text = RenderComparisonText(c, "a", "b");
  EXPECT_NE(text.find("note: gpus.count differs ('4' vs '1'): B is a managed endpoint, whose "
                      "hardware is not known; compare cost per completed request"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("note: the layout of a managed endpoint is not known"), std::string::npos)
      << text;
  // The same GPU difference between two self-hosted runs is a mismatch.
  managed.managed_endpoint = false;
  ASSERT_TRUE(CompareRuns({self_hosted}, {managed}, &c).ok());
  EXPECT_FALSE(c.matched());
}

TEST(Comparison, PairsByLoadPointAndListsTheUnpaired) {
  std::vector<ComparedRun> a = {MakeRun("c=1", "concurrency 1", "vllm", 10, 5),
                                MakeRun("c=8", "concurrency 8", "vllm", 30, 20)};
  std::vector<ComparedRun> b = {MakeRun("c=8", "concurrency 8", "sglang", 25, 22),
                                MakeRun("c=64", "concurrency 64", "sglang", 90, 60)};
  Comparison c;
  ASSERT_TRUE(CompareRuns(a, b, &c).ok());
  ASSERT_EQ(c.pairs.size(), 1u);
  EXPECT_EQ(c.pairs[0].load_point, "concurrency 8");
  ASSERT_EQ(c.unpaired.size(), 2u);
  EXPECT_EQ(c.unpaired[0], "A 'c=1' (concurrency 1): no run of B at this load point");
  EXPECT_EQ(c.unpaired[1], "B 'c=64' (concurrency 64): no run of A at this load point");
}

TEST(Comparison, AmbiguousOrDisjointSweepsAreRefused) {
  Comparison c;
  Status s = CompareRuns({MakeRun("tp=1 c=1", "concurrency 1", "vllm", 10, 5),
                          MakeRun("tp=2 c=1", "concurrency 1", "vllm", 8, 5)},
                         {MakeRun("c=1", "concurrency 1", "vllm", 8, 5)}, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sweep A has two configurations at load point 'concurrency 1' "
                             "('tp=1 c=1' and 'tp=2 c=1')"),
            std::string::npos)
      << s.message();
  s = CompareRuns({MakeRun("c=1", "concurrency 1", "vllm", 10, 5)},
                  {MakeRun("c=2", "concurrency 2", "vllm", 8, 5)}, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("share no load point"), std::string::npos);
  auto failed = MakeRun("c=1", "concurrency 1", "vllm", 10, 5);
  failed.ok = false;
  s = CompareRuns({MakeRun("c=1", "concurrency 1", "vllm", 10, 5)}, {failed}, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sweep B has no run with an ok result"), std::string::npos);
}

TEST(Comparison, DescribeRunSeparatesConditionsFromTheSystemUnderTest) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setEngine("vllm");
  spec.setModel("meta-llama/Llama-3.1-8B-Instruct");
  spec.getLayout().setTp(2);
  spec.setGpusNeeded(2);
  auto w = spec.initWorkload();
  w.setConcurrency(16);
  w.setTemperature(0.5);
  w.setNumRequests(200);
  spec.getSlo().setTtftMs(250);
  ComparedRun run;
  DescribeRun(spec.asReader(), {{"gpu_model", "NVIDIA H200"}, {"input_len_dist", "fixed:128"}},
              &run);
  auto value = [](const std::vector<Field>& fields, const std::string& name) {
    for (const auto& f : fields) {
      if (f.name == name) return f.value;
    }
    return std::string("(absent)");
  };
  EXPECT_EQ(value(run.conditions, "gpus.model"), "NVIDIA H200");
  EXPECT_EQ(value(run.conditions, "gpus.count"), "2");
  EXPECT_EQ(value(run.conditions, "workload.temperature"), "0.5");
  EXPECT_EQ(value(run.conditions, "workload.input_len"), "fixed:128");
  EXPECT_EQ(value(run.conditions, "window.requests"), "200");
  EXPECT_EQ(value(run.conditions, "slo.ttft_ms"), "250");
  EXPECT_EQ(value(run.conditions, "layout.tp"), "(absent)");
  EXPECT_EQ(value(run.system, "layout.tp"), "2");
  EXPECT_EQ(value(run.system, "engine"), "vllm");
  EXPECT_EQ(value(run.system, "sim.ttft_ms"), "(absent)");
  EXPECT_EQ(run.load_point, "concurrency 16");
  w.setConcurrency(0);
  w.setRequestRatePerS(4);
  w.setMaxInFlight(16);
  DescribeRun(spec.asReader(), {}, &run);
  EXPECT_EQ(run.load_point, "rate 4/s max 16");
}

// The engine's lifecycle and the prefix cache a run started from are conditions: a fresh
// engine and a verified reset are the same start, an unreset cache is not; a cold run against a
// warm one is a note, not a mismatch.
TEST(Comparison, LifecycleAndCacheStateMustMatchAndColdAgainstWarmIsNoted) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setEngine("vllm");
  spec.initWorkload().setConcurrency(4);
  auto described = [&](const std::string& lifecycle, const std::string& index,
                       const std::string& cache, const std::string& engine) {
    ComparedRun run;
    DescribeRun(
        spec.asReader(),
        {{"engine_lifecycle", lifecycle}, {"engine_run_index", index}, {"cache_state", cache}},
        &run);
    run.ok = true;
    run.run_id = run.label = engine + index;
    run.system = {{"engine", engine}};
    run.figures = {{"ttft_median_ms", 10}};
    return run;
  };
  auto compare = [](const ComparedRun& a, const ComparedRun& b) {
    Comparison c;
    EXPECT_TRUE(CompareRuns({a}, {b}, &c).ok());
    EXPECT_EQ(c.pairs.size(), 1u);
    return c.pairs.empty() ? ComparedPair() : c.pairs[0];
  };
  const ComparedRun cold = described("per_configuration", "0", "cold", "vllm");
  const ComparedRun reset = described("per_configuration", "2", "reset", "sglang");
  ComparedPair pair = compare(cold, reset);
  EXPECT_TRUE(pair.mismatches.empty()) << pair.mismatches.front();
  ASSERT_EQ(pair.notes.size(), 1u);
  EXPECT_EQ(pair.notes[0].rfind("A's run ran on a cold engine, B's on a warm one", 0), 0u)
      << pair.notes[0];
  pair = compare(described("per_configuration", "1", "not_reset: no reset", "vllm"), reset);
  ASSERT_EQ(pair.mismatches.size(), 1u);
  EXPECT_EQ(pair.mismatches[0], "engine.prefix_cache: 'not reset' vs 'empty'");
  EXPECT_TRUE(pair.notes.empty());
  pair = compare(described("per_run", "0", "cold", "vllm"), cold);
  ASSERT_EQ(pair.mismatches.size(), 1u);
  EXPECT_EQ(pair.mismatches[0], "engine.lifecycle: 'per_run' vs 'per_configuration'");
}

// The quality gate: B's accuracy below A's by more than the margin fails, and B's speed-ups are
// then not presented as wins; within the margin it passes.
TEST(Comparison, QualityGateFailsBelowTheBaselineByMoreThanTheMargin) {
  auto with_quality = [](ComparedRun run, double accuracy) {
    run.quality_task_set = "arithmetic: 50 tasks, seed 1, max_tokens 16";
    run.quality_margin = 0.02;
    run.figures["quality_accuracy"] = accuracy;
    return run;
  };
  const std::vector<ComparedRun> a = {
      with_quality(MakeRun("c=4", "concurrency 4", "vllm", 20, 100), 0.96)};
  // B is faster (lower TTFT, higher throughput) but answers worse.
  const std::vector<ComparedRun> worse = {
      with_quality(MakeRun("c=4", "concurrency 4", "vllm-fp4", 10, 150), 0.80)};
  Comparison c;
  ASSERT_TRUE(CompareRuns(a, worse, &c).ok());
  const auto& gate = c.pairs[0].quality;
  EXPECT_TRUE(gate.applied);
  EXPECT_TRUE(gate.failed);
  EXPECT_EQ(gate.text, "quality gate FAILED: accuracy 0.80 < baseline 0.96 - 0.02");
  EXPECT_EQ(Figure(c.pairs[0], "ttft_median_ms").verdict.Text(), "not a win: quality gate FAILED");
  EXPECT_EQ(Figure(c.pairs[0], "request_throughput").verdict.Text(),
            "not a win: quality gate FAILED");
  EXPECT_EQ(Figure(c.pairs[0], "quality_accuracy").verdict.Text(),
            "B worse, noise unknown (<2 repeats)");
  const std::string text = RenderComparisonText(c, "A", "B");
  EXPECT_NE(text.find("quality gate FAILED: accuracy 0.80 < baseline 0.96 - 0.02 (B's speed-ups "
                      "are not wins)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("B better"), std::string::npos) << text;
  const auto json = nlohmann::json::parse(RenderComparisonJson(c, "A", "B"));
  EXPECT_TRUE(json["pairs"][0]["quality_gate"]["failed"].get<bool>());

  // 0.95 is within 0.02 of 0.96: the gate passes and the speed-up stays a win.
  const std::vector<ComparedRun> close = {
      with_quality(MakeRun("c=4", "concurrency 4", "vllm-fp8", 10, 150), 0.95)};
  ASSERT_TRUE(CompareRuns(a, close, &c).ok());
  EXPECT_FALSE(c.pairs[0].quality.failed);
  EXPECT_EQ(c.pairs[0].quality.text, "quality gate passed: accuracy 0.95 >= baseline 0.96 - 0.02");
  EXPECT_EQ(Figure(c.pairs[0], "ttft_median_ms").verdict.Text(),
            "B better, noise unknown (<2 repeats)");

  // Different task sets: no gate, and it says why.
  std::vector<ComparedRun> other = close;
  other[0].quality_task_set = "jsonl:qa.jsonl: 10 tasks, seed 0, max_tokens 16";
  ASSERT_TRUE(CompareRuns(a, other, &c).ok());
  EXPECT_FALSE(c.pairs[0].quality.applied);
  EXPECT_NE(c.pairs[0].quality.text.find("task sets differ"), std::string::npos);

  // In a comparison group the failed member is flagged in the table and below it.
  std::vector<ComparedRun> group = {a[0], worse[0]};
  group[0].label = "engine=vllm";
  group[1].label = "engine=vllm-fp4";
  group[0].baseline = true;
  for (auto& run : group) run.compare_group = "concurrency=4";
  const std::string md = RenderGroupComparisons(group);
  EXPECT_NE(md.find("quality_accuracy |"), std::string::npos) << md;
  EXPECT_NE(md.find("| engine=vllm-fp4 **quality gate FAILED** |"), std::string::npos) << md;
  EXPECT_NE(md.find("- engine=vllm-fp4: **quality gate FAILED: accuracy 0.80 < baseline 0.96 - "
                    "0.02** (its speed changes are not wins)"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("better"), std::string::npos) << md;
}

}  // namespace
}  // namespace servesweep::report

namespace servesweep::report {
namespace {

// The engines' own resolution decides whether a comparison is matched, not the matrix key:
// SGLang's --max-prefill-tokens from max_batched_tokens is not vLLM's step budget.
TEST(Comparison, EffectiveBudgetsThatDifferUnderTheSameMatrixKeysAreNotMatched) {
  auto with = [](ComparedRun run, std::vector<Field> effective, const std::string& budget) {
    run.effective = std::move(effective);
    run.system.push_back({"engine_config.max_batched_tokens", budget});
    return run;
  };
  const ComparedRun vllm = with(MakeRun("c=4", "concurrency 4", "vllm", 20, 100),
                                {{"prefill_budget_tok", "8192"},
                                 {"max_running_requests", "256"},
                                 {"kv_cache_dtype", "bfloat16"}},
                                "default");
  const ComparedRun sglang = with(MakeRun("c=4", "concurrency 4", "sglang", 18, 110),
                                  {{"prefill_budget_tok", "16384"},
                                   {"max_running_requests", "256"},
                                   {"kv_cache_dtype", "bfloat16"}},
                                  "default");
  Comparison c;
  ASSERT_TRUE(CompareRuns({vllm}, {sglang}, &c).ok());
  EXPECT_FALSE(c.matched());
  ASSERT_EQ(c.pairs[0].mismatches.size(), 1u);
  EXPECT_EQ(c.pairs[0].mismatches[0],
            "effective.prefill_budget_tok: '8192' vs '16384' (the engines resolved the same "
            "matrix settings differently)");
  ASSERT_EQ(c.pairs[0].effective_changes.size(), 1u);
  EXPECT_NE(RenderComparisonText(c, "a", "b").find("NOT matched"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(RenderComparisonJson(c, "a", "b"))["matched"], false);

  // Budgets that differ because the matrix asked so are the compared axis, listed, matched.
  const ComparedRun bigger = with(MakeRun("c=4", "concurrency 4", "vllm", 18, 110),
                                  {{"prefill_budget_tok", "16384"},
                                   {"max_running_requests", "256"},
                                   {"kv_cache_dtype", "bfloat16"}},
                                  "16384");
  ASSERT_TRUE(CompareRuns({vllm}, {bigger}, &c).ok());
  EXPECT_TRUE(c.matched());
  EXPECT_EQ(c.pairs[0].effective_changes.size(), 1u);
  EXPECT_NE(RenderComparisonText(c, "a", "b")
                .find("effective setting differs: effective.prefill_budget_tok: '8192' vs "
                      "'16384'"),
            std::string::npos);
  // A side without an engine check is said so, and no effective match is claimed for it.
  ComparedRun unchecked = MakeRun("c=4", "concurrency 4", "vllm", 18, 110);
  ASSERT_TRUE(CompareRuns({vllm}, {unchecked}, &c).ok());
  ASSERT_EQ(c.pairs[0].effective_unknown.size(), 1u);
  EXPECT_NE(c.pairs[0].effective_unknown[0].find("effective settings of B unknown"),
            std::string::npos);
}

TEST(Comparison, DescribeRunReadsTheEffectiveSettingsAndTheMatrixsEngineSettings) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setEngine("sglang");
  spec.getEngineConfig().setMaxNumSeqs(128);
  ComparedRun run;
  DescribeRun(spec.asReader(),
              {{"effective_settings",
                "prefill_budget_tok=16384; decode0:max_running_requests=n/a: sized from the KV "
                "pool at load"}},
              &run);
  ASSERT_EQ(run.effective.size(), 2u);
  EXPECT_EQ(run.effective[0].name, "prefill_budget_tok");
  EXPECT_EQ(run.effective[0].value, "16384");
  EXPECT_EQ(run.effective[1].name, "decode0:max_running_requests");
  EXPECT_EQ(run.effective[1].value, "n/a: sized from the KV pool at load");
  bool found = false;
  for (const auto& f : run.system) {
    if (f.name == "engine_config.max_num_seqs") found = f.value == "128";
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace servesweep::report
