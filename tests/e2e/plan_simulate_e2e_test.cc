// End-to-end: `servesweep plan --simulate` runs a topology sweep through the performance model
// in virtual time and writes the results database and reports a sweep would, marked simulated.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

const char* kTopology = R"(name: topo
engine: sim
model: meta-llama/Llama-3.1-70B-Instruct
precision: fp8
sim: {hardware: h200}
workload: {input_len: 1024, output_len: 128, num_requests: 100, seed: 3}
cluster: {nodes: 1, gpus_per_node: 4}
axes:
  layout: [{tp: 1}, {tp: 2}, {tp: 4}, {tp: 8}]
  concurrency: [1, 32]
where: "gpus <= gpus_per_node * nodes"
compare: [layout]
)";

TEST(PlanSimulate, TopologySweepGoesThroughTheModelIntoTheResultsDatabase) {
  Harness h("plan-simulate");
  const std::string matrix = h.WriteFile("topo.yaml", kTopology);
  const std::string out = h.Path("out");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --simulate --out {}", matrix, out), &output), 0)
      << output;
  EXPECT_EQ(output.rfind("SIMULATED", 0), 0u) << output;
  // tp=8 is left out by `where`: 3 layouts x 2 concurrencies, all committed once, all simulated.
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status = 'done'"), 6);
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE simulation LIKE "
                       "'perfmodel: hardware % model llama-3.1-70b'"),
            6);
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM requests"), 600);
  EXPECT_EQ(h.QueryInt(out, "SELECT SUM(completed) FROM results"), 600);
  // The model's trade-offs: at concurrency 1 more TP lowers TPOT; at 32 a run moves more tokens
  // per second than at 1, on every layout.
  const auto tpot = h.Query(out,
                            "SELECT tp, tpot_median_ms FROM results WHERE concurrency = 1 "
                            "ORDER BY tp");
  ASSERT_EQ(tpot.rows.size(), 3u);
  EXPECT_GT(std::stod(tpot.rows[0][1]), std::stod(tpot.rows[1][1]));
  EXPECT_GT(std::stod(tpot.rows[1][1]), std::stod(tpot.rows[2][1]));
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results a JOIN results b ON a.tp = b.tp "
                       "WHERE a.concurrency = 32 AND b.concurrency = 1 AND "
                       "a.output_throughput > b.output_throughput"),
            3);
  const std::string report = ReadTextFile(out + "/report.md");
  EXPECT_NE(report.find("**SIMULATED**"), std::string::npos);
  // Every run says what its figures stand on: the emulator engine has no fitted profile.
  size_t labelled = 0;
  for (size_t at = 0;
       (at = report.find(": default (uncalibrated), typical error ", at)) != std::string::npos;
       ++at) {
    ++labelled;
  }
  EXPECT_EQ(labelled, 6u) << report;
  EXPECT_NE(report.find("; uncalibrated: cross-validated error unknown (too few cases of this "
                        "kind)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("%; uncalibrated: "), std::string::npos) << report;
  EXPECT_NE(report.find("### concurrency=32"), std::string::npos);
  EXPECT_NE(report.find("Matched: every condition is the same. Varied: layout.tp."),
            std::string::npos)
      << report;

  // A second simulation into the same folder is refused: nothing already there is lost.
  EXPECT_EQ(RunServesweep(fmt::format("plan {} --simulate --out {}", matrix, out), &output), 1);
  EXPECT_NE(output.find("expected a new output folder"), std::string::npos) << output;
}

// workload.early_stop in the model: a request-rate ladder whose middle level floods the engine
// stops there, over-saturated with its evidence, and the level above is skipped (no GPU-hours
// in the estimate, a skipped run in the database), as the coordinator would.
TEST(PlanSimulate, AnOversaturatedLevelStopsEarlyAndTheLadderAboveIsSkipped) {
  Harness h("plan-simulate-early-stop");
  const std::string matrix = h.WriteFile("ladder.yaml", R"(name: ladder
engine: vllm
engine_version: "0.33.0"
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h200}
workload:
  input_len: 512
  output_len: 128
  early_stop: {oversaturated: {min_s: 10, window_s: 20}}
zip:
  - request_rate: [5, 200, 400]
    num_requests: [400, 12000, 12000]
)");
  const std::string out = h.Path("out");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --simulate --out {}", matrix, out), &output), 0)
      << output;
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status = 'done'"), 2) << output;
  EXPECT_EQ(h.QueryInt(out, "SELECT COUNT(*) FROM runs WHERE status = 'skipped'"), 1) << output;
  EXPECT_EQ(h.QueryInt(out, "SELECT completed FROM results WHERE request_rate_per_s = 5"), 400);
  const auto flooded = h.Query(out,
                               "SELECT stopped, stop_evidence, stopped_at_s, completed FROM "
                               "results WHERE request_rate_per_s = 200");
  ASSERT_EQ(flooded.rows.size(), 1u);
  EXPECT_EQ(flooded.rows[0][0], "oversaturated");
  EXPECT_NE(flooded.rows[0][1].find("due -> first token grew"), std::string::npos);
  EXPECT_LT(std::stod(flooded.rows[0][2]), 40);
  EXPECT_LT(std::stoi(flooded.rows[0][3]), 12000);
  // The model's energy: one H200 at its 700 W max power over the simulated phase, labelled as
  // the model's and never valid (nothing was measured).
  const auto energy = h.Query(out,
                              "SELECT energy_j, duration_s, energy_valid, energy_source, "
                              "energy_per_output_tok_j * total_output_tokens FROM results "
                              "WHERE request_rate_per_s = 5");
  ASSERT_EQ(energy.rows.size(), 1u);
  EXPECT_NEAR(std::stod(energy.rows[0][0]), 700 * std::stod(energy.rows[0][1]), 1e-6);
  EXPECT_EQ(energy.rows[0][2], "0");
  EXPECT_EQ(energy.rows[0][3], "model: 1 GPU(s) at h200's max power 700 W (an upper bound)");
  EXPECT_NEAR(std::stod(energy.rows[0][4]), std::stod(energy.rows[0][0]), 1e-6);
  const auto skipped = h.Query(out,
                               "SELECT result_error FROM results WHERE result_status = "
                               "'skipped'");
  ASSERT_EQ(skipped.rows.size(), 1u);
  EXPECT_NE(skipped.rows[0][0].find("request_rate 200/s"), std::string::npos) << skipped.rows[0][0];
  EXPECT_NE(skipped.rows[0][0].find("over-saturated"), std::string::npos) << skipped.rows[0][0];

  // The estimate skips it too, and says so.
  ASSERT_EQ(RunServesweep(fmt::format("plan {}", matrix), &output), 0) << output;
  EXPECT_NE(output.find(" GPU-hours for 2 of 3 runs"), std::string::npos) << output;
  EXPECT_NE(output.find("1 run(s) skipped, no GPU-hours"), std::string::npos) << output;
  EXPECT_NE(output.find("kWh: every GPU-hour at the GPUs' max power"), std::string::npos) << output;
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --json", matrix), &output), 0) << output;
  const auto plan = nlohmann::json::parse(output);
  EXPECT_EQ(plan["skipped_runs"], 1);
  EXPECT_EQ(plan["estimated_runs"], 2);
  // Every GPU-hour at 700 W: an upper bound.
  EXPECT_NEAR(plan["energy_upper_bound_kwh"].get<double>(),
              plan["total_gpu_hours"].get<double>() * 0.7, 1e-9);
  ASSERT_EQ(plan["runs"].size(), 3u);
  EXPECT_NE(plan["runs"][2]["skipped"].get<std::string>().find("over-saturated"),
            std::string::npos);
}

TEST(PlanSimulate, UnknownProfilesAreNamedBeforeOrWhileSimulating) {
  Harness h("plan-simulate-errors");
  std::string text = kTopology;
  text.replace(text.find("h200"), 4, "h2000");
  std::string output;
  EXPECT_EQ(RunServesweep(fmt::format("plan {} --simulate --out {}", h.WriteFile("bad.yaml", text),
                                      h.Path("bad")),
                          &output),
            1);
  EXPECT_NE(output.find("bad.yaml:5:17:"), std::string::npos) << output;
  EXPECT_NE(output.find("h2000"), std::string::npos) << output;

  text = kTopology;
  text.replace(text.find("meta-llama/Llama-3.1-70B-Instruct"), 33, "acme/unknown-model");
  EXPECT_EQ(RunServesweep(fmt::format("plan {} --simulate --out {}",
                                      h.WriteFile("unknown.yaml", text), h.Path("unknown")),
                          &output),
            2);
  EXPECT_NE(output.find("sim.model_profile: expected a model profile"), std::string::npos)
      << output;
  EXPECT_EQ(h.QueryInt(h.Path("unknown"), "SELECT COUNT(*) FROM runs WHERE status = 'failed'"), 6);
}

TEST(PlanSimulate, MeasuredProbeFiguresBecomeTheHardwareProfile) {
  Harness h("plan-simulate-measured");
  const std::string profile = h.Path("h200-here.yaml");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("probe --hardware-profile {} --from {}", profile,
                                      SERVESWEEP_SOURCE_DIR "/tests/data/h200-probe-report.json"),
                          &output),
            0)
      << output;
  std::string text = kTopology;
  text.replace(text.find("sim: {hardware: h200}"), 21, "sim: {hardware: " + profile + "}");
  const std::string out = h.Path("out");
  ASSERT_EQ(
      RunServesweep(fmt::format("plan {} --simulate --out {}", h.WriteFile("m.yaml", text), out),
                    &output),
      0)
      << output;
  EXPECT_EQ(h.QueryInt(out,
                       "SELECT COUNT(*) FROM results WHERE simulation = "
                       "'perfmodel: hardware h200-measured, model llama-3.1-70b'"),
            6);
  // Measured HBM (3.96 TB/s at efficiency 1) is below the spec sheet's achievable figure
  // (4.8 TB/s x 0.85): a memory-bound decode at concurrency 1 is slower on the measured profile.
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --simulate --out {}",
                                      h.WriteFile("spec.yaml", kTopology), h.Path("spec")),
                          &output),
            0);
  const double measured =
      std::stod(h.Query(out, "SELECT tpot_median_ms FROM results WHERE tp = 1 AND concurrency = 1")
                    .rows.at(0)
                    .at(0));
  const double spec = std::stod(
      h.Query(h.Path("spec"), "SELECT tpot_median_ms FROM results WHERE tp = 1 AND concurrency = 1")
          .rows.at(0)
          .at(0));
  EXPECT_GT(measured, spec);
}

TEST(Plan, EstimatesGpuHoursAndListsProblemsBeforeAnythingRuns) {
  Harness h("plan-estimates");
  const std::string matrix = h.WriteFile("topo.yaml", kTopology);
  std::string json_text;
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --json", matrix), &json_text), 0) << json_text;
  const auto plan = nlohmann::json::parse(json_text);
  ASSERT_EQ(plan["runs"].size(), 6u);
  double sum = 0;
  for (const auto& run : plan["runs"]) {
    ASSERT_TRUE(run["gpu_hours"].is_number()) << run.dump();
    // GPU-hours = GPUs x estimated seconds / 3600.
    EXPECT_NEAR(run["gpu_hours"].get<double>(),
                run["gpus"].get<double>() * run["estimated_s"].get<double>() / 3600, 1e-12);
    // A run that starts its engine: at least the cold start.
    if (run["starts_engine"].get<bool>()) {
      EXPECT_GT(run["estimated_s"].get<double>(), 10);
    }
    sum += run["gpu_hours"].get<double>();
  }
  EXPECT_NEAR(plan["total_gpu_hours"].get<double>(), sum, 1e-9);
  EXPECT_EQ(plan["problems"], 0);
  // Each estimate says what it stands on: the emulator engine has no profile of its own, so the
  // default one costs it, labelled uncalibrated with that profile's typical error.
  for (const auto& run : plan["runs"]) {
    EXPECT_EQ(run["calibration"], "default (uncalibrated)") << run.dump();
    EXPECT_EQ(run["calibration_standing"].get<std::string>().rfind("uncalibrated", 0), 0u)
        << run.dump();
    EXPECT_GT(run["calibration_error_pct"].get<double>(), 0) << run.dump();
    EXPECT_EQ(run["calibration_kind"], "uncalibrated") << run.dump();
    EXPECT_TRUE(run["calibration_band_low_pct"].is_null()) << run.dump();
  }
  // A vLLM 0.6 run is costed by the shipped vllm-0.6 profile, fitted on H100 and A100 points:
  // on H200 it is extrapolated. --engine-profile replaces that choice for the runs of its engine.
  std::string vllm = kTopology;
  vllm.replace(vllm.find("engine: sim"), 11, "engine: vllm\nengine_version: \"0.6.0\"");
  const std::string vllm_matrix = h.WriteFile("vllm.yaml", vllm);
  std::string labelled;
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --json", vllm_matrix), &labelled), 0) << labelled;
  for (const auto& run : nlohmann::json::parse(labelled)["runs"]) {
    EXPECT_EQ(run["calibration"].get<std::string>().rfind("vllm-0.6 (fitted", 0), 0u) << run.dump();
    EXPECT_EQ(run["calibration_standing"].get<std::string>().rfind("extrapolated", 0), 0u)
        << run.dump();
    EXPECT_EQ(run["calibration_kind"], "other hardware") << run.dump();
  }
  std::ifstream shipped(std::string(SERVESWEEP_SOURCE_DIR) + "/profiles/engines/default.yaml");
  std::string mine((std::istreambuf_iterator<char>(shipped)), std::istreambuf_iterator<char>());
  mine.replace(mine.find("name: default"), 13, "name: mine");
  mine.replace(mine.find("engine: any"), 11, "engine: vllm");
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --json --engine-profile {}", vllm_matrix,
                                      h.WriteFile("mine.yaml", mine)),
                          &labelled),
            0)
      << labelled;
  for (const auto& run : nlohmann::json::parse(labelled)["runs"]) {
    EXPECT_EQ(run["calibration"], "mine (uncalibrated)") << run.dump();
  }
  ASSERT_EQ(RunServesweep(fmt::format("plan {}", matrix), &labelled), 0) << labelled;
  // The printed error is the cross-validated band of its kind (profiles/error_bands.yaml),
  // never the fit's own: no uncalibrated case was held out, so it is unknown.
  EXPECT_NE(labelled.find("uncalibrated: error unknown"), std::string::npos) << labelled;
  // A user's own cross-validation (calibrate --cross-validate --bands-out) labels the runs.
  const std::string bands = h.WriteFile("bands.yaml", R"(measured_by: test
measured_at: 2026-12-02
bands:
  - {kind: uncalibrated, low_pct: -40, high_pct: 60, figures: 9, cases: 3}
)");
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --error-bands {}", matrix, bands), &labelled), 0)
      << labelled;
  EXPECT_NE(labelled.find("uncalibrated -40%/+60%"), std::string::npos) << labelled;
  ASSERT_EQ(RunServesweep(fmt::format("plan {} --json --error-bands {}", matrix, bands), &labelled),
            0)
      << labelled;
  for (const auto& run : nlohmann::json::parse(labelled)["runs"]) {
    EXPECT_EQ(run["calibration_band_low_pct"], -40) << run.dump();
    EXPECT_EQ(run["calibration_band_high_pct"], 60) << run.dump();
  }
  const std::string broken = h.WriteFile("broken.yaml", "measured_by: test\nbands: []\n");
  EXPECT_EQ(RunServesweep(fmt::format("plan {} --error-bands {}", matrix, broken), &labelled), 1);
  EXPECT_NE(labelled.find("--error-bands: "), std::string::npos) << labelled;
  EXPECT_NE(labelled.find("measured_at"), std::string::npos) << labelled;

  // Without `where`, tp=8 needs more GPUs than the cluster; Llama-70B in bf16 does not fit one
  // H100. Both are problems found before any GPU is spent, and plan fails.
  std::string text = kTopology;
  text.replace(text.find("where:"), text.find("compare:") - text.find("where:"), "");
  text.replace(text.find("precision: fp8"), 14, "precision: bf16");
  text.replace(text.find("h200"), 4, "h100");
  std::string output;
  EXPECT_EQ(RunServesweep(fmt::format("plan {}", h.WriteFile("bad.yaml", text)), &output), 1);
  EXPECT_NE(output.find("problem: needs 8 GPUs, the cluster has 4 (1 x 4)"), std::string::npos)
      << output;
  EXPECT_NE(output.find("needs 141.1 GB of weights per GPU over tp=1"), std::string::npos)
      << output;

  // No hardware named: the run list without estimates, and says why.
  text = kTopology;
  text.replace(text.find("sim: {hardware: h200}"), 21, "");
  ASSERT_EQ(RunServesweep(fmt::format("plan {}", h.WriteFile("nohw.yaml", text)), &output), 0)
      << output;
  EXPECT_NE(output.find("no GPU-hour estimates: name a hardware profile"), std::string::npos)
      << output;
}

TEST(Examples, ShippedMatricesPlanWithCommandsAndSimulate) {
  Harness h("examples");
  for (const std::string name : {"vllm-vs-sglang", "topology-sweep", "pd-disagg"}) {
    const std::string matrix = SERVESWEEP_SOURCE_DIR "/examples/" + name + ".yaml";
    std::string output;
    ASSERT_EQ(RunServesweep(fmt::format("plan {} --commands", matrix), &output), 0) << output;
    EXPECT_NE(output.find("; 0 problem(s)"), std::string::npos) << output;
    ASSERT_EQ(
        RunServesweep(fmt::format("plan {} --simulate --out {}", matrix, h.Path(name)), &output), 0)
        << output;
  }
  std::string commands;
  ASSERT_EQ(RunServesweep("plan " SERVESWEEP_SOURCE_DIR "/examples/vllm-vs-sglang.yaml --commands",
                          &commands),
            0);
  // One engine per configuration: vLLM in its development mode, for its prefix-cache reset.
  EXPECT_NE(
      commands.find("[engine] VLLM_SERVER_DEV_MODE=1 vllm serve meta-llama/Llama-3.1-8B-Instruct"),
      std::string::npos);
  EXPECT_NE(commands.find("cache reset: POST /reset_prefix_cache"), std::string::npos);
  EXPECT_NE(commands.find("cache reset: POST /flush_cache"), std::string::npos);
  EXPECT_NE(commands.find("sglang serve --model-path meta-llama/Llama-3.1-8B"), std::string::npos);
  // Repeats are estimated once (they simulate identically) and carry that estimate.
  std::string plan_json;
  ASSERT_EQ(RunServesweep("plan " SERVESWEEP_SOURCE_DIR "/examples/vllm-vs-sglang.yaml --json",
                          &plan_json),
            0);
  const auto whole = nlohmann::json::parse(plan_json);
  const auto plan = whole["runs"];
  ASSERT_EQ(plan.size(), 24u);  // 2 engines x 4 concurrencies x 3 repeats
  for (size_t i = 0; i < plan.size(); ++i) {
    ASSERT_TRUE(plan[i]["gpu_hours"].is_number()) << plan[i].dump();
    EXPECT_GT(plan[i]["gpu_hours"].get<double>(), 0);
    // One engine per configuration: only each engine's first run pays its cold start.
    const bool first = i == 0 || i == 3;  // the first vLLM run, the first SGLang run
    EXPECT_EQ(plan[i]["starts_engine"], first) << i;
    if (!first) {
      EXPECT_EQ(plan[i]["gpu_hours"], plan[i - i % 3 + 1]["gpu_hours"]) << i;
    }
  }
  EXPECT_GT(plan[0]["gpu_hours"].get<double>(), plan[1]["gpu_hours"].get<double>());
  EXPECT_EQ(whole["engine_starts"], 2);
  const auto& phases = whole["gpu_hours_by_phase"];
  EXPECT_NEAR(phases["starting"].get<double>() + phases["warming_up"].get<double>() +
                  phases["measuring"].get<double>(),
              whole["total_gpu_hours"].get<double>(), 1e-9);
  // A cold engine per run would add the 22 cold starts the kept engines avoid.
  EXPECT_NEAR(
      whole["total_gpu_hours_per_run"].get<double>() - whole["total_gpu_hours"].get<double>(),
      11 * phases["starting"].get<double>(), 1e-9);
  // vLLM against SGLang: matched at every load point, one varied axis (the engine and its
  // version go together), no warning.
  const std::string report = ReadTextFile(h.Path("vllm-vs-sglang") + "/report.md");
  EXPECT_NE(report.find("### concurrency=64"), std::string::npos) << report;
  EXPECT_NE(report.find("Matched: every condition is the same. Varied: engine."), std::string::npos)
      << report;
  EXPECT_EQ(report.find("**Warning**"), std::string::npos) << report;
  // Disaggregation keeps decode steps free of prefill: lower TPOT than 4 aggregated replicas.
  const auto tpot = h.Query(h.Path("pd-disagg"),
                            "SELECT pd_split, tpot_median_ms FROM results WHERE concurrency = 64 "
                            "ORDER BY pd_split");
  ASSERT_EQ(tpot.rows.size(), 3u);
  EXPECT_EQ(tpot.rows[2][0], "none");
  EXPECT_LT(std::stod(tpot.rows[1][1]), std::stod(tpot.rows[2][1]));  // 2P2D vs aggregated
}

// `calibrate --cross-validate` as users run it: the pooled recipes' held-out figures, bands
// per kind (unknown below three cases), JSON and text, and a malformed recipe refused.
TEST(Calibrate, CrossValidateRendersHeldOutFiguresAndBandsAndRefusesABadRecipe) {
  Harness h("calibrate-cross-validate");
  h.WriteFile("llama.yaml", R"(name: llama
engine: vllm
engine_version: 0.12.0
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h100}
workload: {input_len: 40, output_len: 100, num_requests: 16}
local: {agents: 1, gpus_per_agent: 1}
axes:
  concurrency: [1, 2, 4]
)");
  std::string table = "cases:\n";
  for (const int c : {1, 2, 4}) {
    table += fmt::format(
        "  - name: c{0}\n    source: s{0}\n    conditions: test\n    matrix: llama.yaml\n"
        "    points:\n      - match: {{concurrency: {0}}}\n"
        "        figures: {{ttft_median_ms: {1}, tpot_median_ms: {2}}}\n",
        c, 20 + c, 7 + 0.2 * c);
  }
  const std::string path = h.WriteFile("table.yaml", table);
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("calibrate --published {} --cross-validate --recipe "
                                      "vllm-0.12=cpu.step_us --json",
                                      path),
                          &output),
            0)
      << output;
  const auto json = nlohmann::json::parse(output.substr(output.find('{')));
  ASSERT_EQ(json["cases"].size(), 3u) << output;
  for (const auto& c : json["cases"]) {
    EXPECT_EQ(c["profile"], "vllm-0.12");
    EXPECT_TRUE(c["refitted"].get<bool>());
    EXPECT_GT(c["evaluations"].get<int>(), 5) << c.dump();  // the default budget: 300
  }
  EXPECT_EQ(json["figures"].size(), 6u);
  ASSERT_EQ(json["bands"].size(), 7u);
  EXPECT_EQ(json["bands"][0]["kind"], "in range");
  size_t counted = 0;
  for (const auto& b : json["bands"]) {
    counted += b["figures"].get<size_t>();
    EXPECT_EQ(b["known"].get<bool>(), b["cases"].get<size_t>() >= 3) << b.dump();
  }
  EXPECT_EQ(counted, 6u);

  ASSERT_EQ(RunServesweep(fmt::format("calibrate --published {} --cross-validate --engine-profile "
                                      "vllm-0.12 --fit cpu.step_us",
                                      path),
                          &output),
            0)
      << output;
  EXPECT_NE(output.find("leave-one-case-out: median |error| "), std::string::npos) << output;
  EXPECT_NE(output.find("held out c2 (vllm-0.12): median |error| "), std::string::npos) << output;
  EXPECT_NE(output.find("80% of figures within"), std::string::npos) << output;

  EXPECT_EQ(RunServesweep(
                fmt::format("calibrate --published {} --cross-validate --recipe vllm-0.12", path),
                &output),
            1);
  EXPECT_NE(output.find("calibrate --recipe: expected PROFILE=COEFFICIENTS[@EVALUATIONS], found "
                        "'vllm-0.12'"),
            std::string::npos)
      << output;
  // A recipe's own evaluation budget bounds each of its refits; a bad one is refused.
  ASSERT_EQ(RunServesweep(fmt::format("calibrate --published {} --cross-validate --recipe "
                                      "vllm-0.12=cpu.step_us@5 --json",
                                      path),
                          &output),
            0)
      << output;
  const auto budgeted = nlohmann::json::parse(output.substr(output.find('{')));
  ASSERT_EQ(budgeted["cases"].size(), 3u) << output;
  for (const auto& c : budgeted["cases"]) {
    EXPECT_GE(c["evaluations"].get<int>(), 1) << c.dump();
    EXPECT_LE(c["evaluations"].get<int>(), 5) << c.dump();
  }
  for (const char* bad : {"@0", "@x", "@", "@5x"}) {
    EXPECT_EQ(RunServesweep(fmt::format("calibrate --published {} --cross-validate --recipe "
                                        "vllm-0.12=cpu.step_us{}",
                                        path, bad),
                            &output),
              1)
        << bad;
    EXPECT_NE(output.find(fmt::format("expected a positive number of evaluations after '@', "
                                      "found '{}'",
                                      std::string(bad).substr(1))),
              std::string::npos)
        << output;
  }
  EXPECT_EQ(RunServesweep(fmt::format("calibrate --published {} --cross-validate", path), &output),
            1);
  EXPECT_NE(output.find("expected --engine-profile and --fit"), std::string::npos) << output;
}

}  // namespace
}  // namespace servesweep::testing
