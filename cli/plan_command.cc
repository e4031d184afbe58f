// `servesweep plan MATRIX`: the expanded run list, with the GPUs each run needs, GPU-hour
// estimates from the performance model and every problem found, before anything starts. `--simulate
// --out DIR` runs every run through the performance model in virtual time and writes the results
// database and reports a sweep would (every figure marked simulated).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "cli/engine_checks.h"
#include "cli/model_flags.h"
#include "engines/launch_plan.h"
#include "matrix/load_ladder.h"
#include "matrix/matrix_loader.h"
#include "perfmodel/error_bands.h"
#include "record/virtual_run.h"
#include "report/report.h"
#include "results/results_store.h"

namespace servesweep::cli {
namespace {

// The port `--commands` shows the head's front end on (agents pick a free one when they run).
constexpr uint16_t kFrontEndPort = 8000;

struct PlanOptions {
  std::string matrix_path;
  bool simulate = false;
  std::string out_dir;
  ModelFlags model;
  bool json = false;
  bool commands = false;
  bool check_engines = false;
  EngineCheckFlags check;
};

// A run's GPU-hour estimate from the model, or the problem that prevents one.
struct Estimate {
  bool known = false;
  double duration_s = 0;  // cold start (when the run starts its engine) + warm-up + measured
  double gpu_hours = 0;
  // The phases, in GPU-hours: the engine's cold start, warm-up, the measured phase.
  double cold_start_s = 0;
  double starting_gpu_hours = 0, warmup_gpu_hours = 0, measuring_gpu_hours = 0;
  record::CalibrationLabel label;  // the model's standing for this run
  double max_power_w = 0;          // per GPU, the hardware profile's (0 = not known)
  // The model's phase ended over-saturated (workload.early_stop): the ladder above it is skipped.
  bool oversaturated = false;
  std::string stop_evidence;
  std::vector<std::string> problems;
};

// "in range -17%/+58%", "other model: error unknown": how far an estimate may be off, from the
// cross-validated band of figures like it (perfmodel/error_bands.h), never from the fit's own
// error; unknown while too few cases of its kind were held out.
std::string Standing(const std::string& kind, double band_low_pct, double band_high_pct) {
  if (std::isnan(band_low_pct) || std::isnan(band_high_pct)) return kind + ": error unknown";
  return fmt::format("{} {:+.0f}%/{:+.0f}%", kind, band_low_pct, band_high_pct);
}
std::string Standing(const record::CalibrationLabel& label) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return Standing(perfmodel::ExtrapolationKindName(label.kind),
                  label.band.known() ? label.band.low_pct : nan,
                  label.band.known() ? label.band.high_pct : nan);
}

Estimate EstimateRun(schema::RunSpec::Reader spec, const record::VirtualRunOptions& options,
                     const matrix::LoadedMatrix& loaded) {
  Estimate e;
  const auto& cluster = loaded.cluster;
  const uint64_t cluster_gpus = uint64_t{cluster.agents} * cluster.gpus_per_agent;
  if (loaded.cluster_declared && spec.getGpusNeeded() > cluster_gpus) {
    e.problems.push_back(fmt::format("needs {} GPUs, the cluster has {} ({} x {})",
                                     spec.getGpusNeeded(), cluster_gpus, cluster.agents,
                                     cluster.gpus_per_agent));
  }
  if (spec.getSim().getHardware().size() == 0 && options.default_hardware.empty()) return e;
  // A managed endpoint's hardware is not ours to model: nothing to estimate, nothing to refuse.
  if (spec.getEngine() == "external") return e;
  record::SimulatedRun sim;
  if (Status s = record::SimulateRun(spec, options, &sim); !s.ok()) {
    e.problems.push_back(s.message());
    return e;
  }
  if (sim.rejected > 0) {
    e.problems.push_back(fmt::format("{} request(s) never fit in the KV cache", sim.rejected));
  }
  const auto w = spec.getWorkload();
  // The warm-up runs its length whatever the measured phase does (early stop): its share per
  // measured request completed.
  const double warmup_share = sim.completed > 0 ? double(w.getWarmupRequests()) / sim.completed : 0;
  e.known = true;
  e.label = sim.label;
  e.oversaturated = sim.stopped == loadgen::StopReason::kOversaturated;
  e.stop_evidence = sim.stop_evidence;
  e.duration_s = sim.cold_start_s + sim.duration_s * (1 + warmup_share);
  e.gpu_hours = spec.getGpusNeeded() * e.duration_s / 3600;
  e.cold_start_s = sim.cold_start_s;
  e.max_power_w = sim.max_power_w;
  e.starting_gpu_hours = spec.getGpusNeeded() * sim.cold_start_s / 3600;
  e.warmup_gpu_hours = spec.getGpusNeeded() * sim.duration_s * warmup_share / 3600;
  e.measuring_gpu_hours = spec.getGpusNeeded() * sim.duration_s / 3600;
  return e;
}

// A run on an engine an earlier run of its configuration started (engine_lifecycle
// per_configuration, one agent): no cold start of its own.
Estimate OnKeptEngine(Estimate e) {
  if (!e.known) return e;
  e.duration_s -= e.cold_start_s;
  e.gpu_hours -= e.starting_gpu_hours;
  e.cold_start_s = 0;
  e.starting_gpu_hours = 0;
  return e;
}

// `--check-engines` in the plan's JSON: each checked process of `run_id`.
nlohmann::json CheckJson(const engines::SweepCheck& check, const std::string& run_id) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : check.processes) {
    if (p.run_id != run_id) continue;
    const auto& v = p.verdict;
    nlohmann::json effective = nlohmann::json::object();
    for (const auto& [name, value] : v.effective) effective[name] = value;
    out.push_back({{"process", p.process},
                   {"verdict", v.Describe()},
                   {"accepted", v.ok()},
                   {"checker", v.checker},
                   {"message", v.message},
                   {"warnings", v.warnings},
                   {"spellings", v.spellings},
                   {"missing_packages", v.missing_packages},
                   {"effective", effective}});
  }
  return out;
}

int PrintPlan(matrix::LoadedMatrix& loaded, const record::VirtualRunOptions& options, bool json,
              bool commands, const engines::SweepCheck* check) {
  const auto runs = loaded.matrix().getRuns();
  nlohmann::json out{{"runs", nlohmann::json::array()}};
  double total_hours = 0, per_run_hours = 0, starting_hours = 0, warmup_hours = 0,
         measuring_hours = 0;
  size_t problems = 0, estimated = 0, engine_starts = 0;
  // Energy at the GPUs' max power over all their GPU-hours (an upper bound; no power model),
  // and the estimated runs whose hardware profile has no max power.
  double energy_upper_kwh = 0;
  size_t without_power = 0;
  // Engine configurations whose engine an earlier run started (engine_lifecycle): assumes each
  // runs on one agent, as the coordinator keeps it there.
  std::set<std::string> started;
  uint64_t gpus = 0;
  if (!json) {
    fmt::print("{:<28} {:<8} {:>5} {:>9} {:>9} {:>7} {:>9} {:>8} {:<24}  {}\n", "run", "engine",
               "GPUs", "requests", "in/out", "conc.", "est. s", "GPU-h", "model", "label");
  }
  // Repeats of a configuration simulate identically (same seed): each is estimated once, at
  // repeat 0, which the matrix places `repeat` runs earlier.
  std::vector<Estimate> estimates;
  // Levels the model finds over-saturated: the coordinator would skip the ladder above them.
  matrix::SaturatedLevels saturated;
  size_t skipped = 0;
  for (auto spec : runs) {
    const auto w = spec.getWorkload();
    if (const std::string skip = saturated.SkipReason(spec); !skip.empty()) {
      estimates.emplace_back();
      ++skipped;
      if (json) {
        out["runs"].push_back({{"run_id", spec.getRunId().cStr()},
                               {"label", spec.getLabel().cStr()},
                               {"skipped", skip}});
      } else {
        fmt::print("{:<28} {:<8} {:>5}  {} (model)  {}\n", spec.getRunId().cStr(),
                   spec.getEngine().cStr(), spec.getGpusNeeded(), skip, spec.getLabel().cStr());
      }
      continue;
    }
    estimates.push_back(spec.getRepeat() > 0 && spec.getIndex() >= spec.getRepeat()
                            ? estimates[spec.getIndex() - spec.getRepeat()]
                            : EstimateRun(spec, options, loaded));
    Estimate& stored = estimates.back();
    if (stored.oversaturated) saturated.Add(spec, stored.stop_evidence);
    // A flag table outside its checked versions is a problem until the engine's check proves
    // the run's command lines (--check-engines counts those it did not prove).
    if (!check && spec.getEngine() != "sim") {
      const auto launches = engines::PlanRunLaunches(spec, {}, kFrontEndPort, "servesweep");
      if (!launches.empty() && !launches[0].launch.unchecked.empty() &&
          std::find(stored.problems.begin(), stored.problems.end(), launches[0].launch.unchecked) ==
              stored.problems.end()) {
        stored.problems.push_back(launches[0].launch.unchecked);
      }
    }
    const bool starts_engine = spec.getEngineLifecycle() == schema::EngineLifecycle::PER_RUN ||
                               spec.getNodesNeeded() > 1 ||
                               started.insert(spec.getEngineConfiguration()).second;
    const Estimate e = starts_engine ? stored : OnKeptEngine(stored);
    engine_starts += starts_engine && e.known;
    per_run_hours += stored.gpu_hours;
    starting_hours += e.starting_gpu_hours;
    warmup_hours += e.warmup_gpu_hours;
    measuring_hours += e.measuring_gpu_hours;
    total_hours += e.gpu_hours;
    energy_upper_kwh += e.gpu_hours * e.max_power_w / 1e3;
    without_power += e.known && e.max_power_w <= 0;
    estimated += e.known;
    problems += e.problems.size();
    gpus = std::max<uint64_t>(gpus, spec.getGpusNeeded());
    const std::string load = w.getRequestRatePerS() > 0
                                 ? fmt::format("{}/s", w.getRequestRatePerS())
                                 : std::to_string(w.getConcurrency());
    if (json) {
      out["runs"].push_back(
          {{"run_id", spec.getRunId().cStr()},
           {"label", spec.getLabel().cStr()},
           {"engine", spec.getEngine().cStr()},
           {"gpus", spec.getGpusNeeded()},
           {"num_requests", w.getNumRequests()},
           {"input_len", w.getInputLenTok()},
           {"output_len", w.getOutputLenTok()},
           {"concurrency", w.getConcurrency()},
           {"request_rate_per_s", w.getRequestRatePerS()},
           {"estimated_s", e.known ? nlohmann::json(e.duration_s) : nlohmann::json(nullptr)},
           {"gpu_hours", e.known ? nlohmann::json(e.gpu_hours) : nlohmann::json(nullptr)},
           {"starts_engine", starts_engine},
           {"calibration", e.known ? nlohmann::json(e.label.calibration) : nlohmann::json(nullptr)},
           {"calibration_error_pct",
            e.known ? nlohmann::json(e.label.error_pct) : nlohmann::json(nullptr)},
           {"calibration_standing",
            e.known ? nlohmann::json(e.label.standing) : nlohmann::json(nullptr)},
           {"calibration_kind", e.known
                                    ? nlohmann::json(perfmodel::ExtrapolationKindName(e.label.kind))
                                    : nlohmann::json(nullptr)},
           {"calibration_band_low_pct", e.known && e.label.band.known()
                                            ? nlohmann::json(e.label.band.low_pct)
                                            : nlohmann::json(nullptr)},
           {"calibration_band_high_pct", e.known && e.label.band.known()
                                             ? nlohmann::json(e.label.band.high_pct)
                                             : nlohmann::json(nullptr)},
           {"problems", e.problems}});
      if (commands) {
        out["runs"].back()["commands"] =
            engines::DescribeRunLaunches(spec, {}, kFrontEndPort, "servesweep");
      }
      if (check) out["runs"].back()["engine_check"] = CheckJson(*check, spec.getRunId().cStr());
      continue;
    }
    fmt::print("{:<28} {:<8} {:>5} {:>9} {:>9} {:>7} {:>9} {:>8} {:<24}  {}\n",
               spec.getRunId().cStr(), spec.getEngine().cStr(), spec.getGpusNeeded(),
               w.getNumRequests(), fmt::format("{}/{}", w.getInputLenTok(), w.getOutputLenTok()),
               load, e.known ? fmt::format("{:.0f}", e.duration_s) : "n/a",
               e.known ? fmt::format("{:.3f}", e.gpu_hours) : "n/a",
               e.known ? Standing(e.label) : "n/a", spec.getLabel().cStr());
    if (e.known && e.label.standing != "calibrated") {
      fmt::print("  model: {}: {}\n", e.label.calibration, e.label.standing);
    }
    for (const auto& problem : e.problems) fmt::print("  problem: {}\n", problem);
    if (commands)
      fmt::print("{}", engines::DescribeRunLaunches(spec, {}, kFrontEndPort, "servesweep"));
  }
  if (check) problems += check->refused + check->unavailable + check->unproven.size();
  if (json) {
    out["total_gpu_hours"] = total_hours;
    out["gpu_hours_by_phase"] = {
        {"starting", starting_hours}, {"warming_up", warmup_hours}, {"measuring", measuring_hours}};
    out["engine_starts"] = engine_starts;
    out["energy_upper_bound_kwh"] =
        estimated > 0 && without_power == 0 ? nlohmann::json(energy_upper_kwh) : nullptr;
    out["total_gpu_hours_per_run"] = per_run_hours;  // with a cold engine for every run
    out["estimated_runs"] = estimated;
    out["skipped_runs"] = skipped;  // above a level the model finds over-saturated
    out["problems"] = problems;
    if (check) {
      out["engine_check"] = {
          {"summary", check->Summary()},         {"accepted", check->accepted},
          {"rejected", check->refused},          {"could_not_check", check->unavailable},
          {"without_check", check->not_checked}, {"unchecked_runs", check->unproven}};
    }
    fmt::print("{}\n", out.dump(2));
  } else {
    if (check) {
      fmt::print(
          "engine check (the engines' own argument handling, no weights, no GPU; "
          "docs/engines.md#engine-check):\n{}{}\n",
          check->Render(), check->Summary());
    }
    fmt::print("{} runs; the largest needs {} GPU(s); {} problem(s)\n", runs.size(), gpus,
               problems);
    if (estimated > 0) {
      fmt::print(
          "estimated {:.2f} GPU-hours for {} of {} runs (performance model; docs/perfmodel.md; "
          "each run's model column says its calibration and expected error): starting {:.2f} "
          "({} engine start(s)), warming up {:.2f}, measuring {:.2f}; a cold engine per run "
          "would spend {:.2f} (docs/matrix.md#engine-lifecycle)\n",
          total_hours, estimated, runs.size(), starting_hours, engine_starts, warmup_hours,
          measuring_hours, per_run_hours);
      if (without_power > 0) {
        fmt::print("energy unknown: the hardware profile of {} run(s) has no max_power_w\n",
                   without_power);
      } else {
        fmt::print(
            "energy at most {:.2f} kWh: every GPU-hour at the GPUs' max power (hardware profile "
            "max_power_w; an upper bound, not measured)\n",
            energy_upper_kwh);
      }
    } else {
      fmt::print("no GPU-hour estimates: name a hardware profile (sim.hardware or --hardware)\n");
    }
    if (skipped > 0) {
      fmt::print(
          "{} run(s) skipped, no GPU-hours: a lower level of their load ladder is over-saturated "
          "in the model (workload.early_stop; docs/matrix.md#early-stop)\n",
          skipped);
    }
  }
  return problems > 0 ? kExitError : kExitOk;
}

// Every run through the model, committed to DIR/results.db as a sweep would; then the reports.
int Simulate(matrix::LoadedMatrix& loaded, const PlanOptions& options,
             const record::VirtualRunOptions& run_options) {
  namespace fs = std::filesystem;
  const std::string db = options.out_dir + "/results.db";
  if (fs::exists(db)) {
    spdlog::error("{}: expected a new output folder for a simulation, found a results database",
                  db);
    return kExitError;
  }
  fs::create_directories(options.out_dir);
  std::unique_ptr<results::ResultsStore> store;
  Status s = results::ResultsStore::Open(db, &store);
  const auto matrix = loaded.matrix();
  if (s.ok()) s = store->InitSweep(matrix, loaded.text);
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  fmt::print("SIMULATED (performance model, virtual time; docs/perfmodel.md)\n");
  fmt::print("{:<36} {:>5} {:>9} {:>11} {:>10} {:>10} {:>9}  {}\n", "run", "GPUs", "req/s",
             "out tok/s", "TTFT p50", "TPOT p50", "sim ms", "model");
  size_t failed = 0;
  // As the coordinator: the pending levels above an over-saturated one are recorded as skipped.
  matrix::SaturatedLevels saturated;
  for (auto spec : matrix.getRuns()) {
    const auto started = std::chrono::steady_clock::now();
    capnp::MallocMessageBuilder message;
    auto result = message.initRoot<schema::RunResult>();
    if (const std::string skip = saturated.SkipReason(spec); !skip.empty()) {
      result.setRunId(spec.getRunId());
      result.setAttempt(1);
      result.setAgentId("virtual");
      result.setSpec(spec);
      result.setStatus(schema::RunStatus::SKIPPED);
      result.setError(skip);
      bool duplicate = false;
      if (s = store->CommitResult(result.asReader(), false, &duplicate); !s.ok()) {
        spdlog::error("{}", s.message());
        return kExitError;
      }
      fmt::print("{:<36} {:>5}  {}\n", spec.getLabel().cStr(), spec.getGpusNeeded(), skip);
      continue;
    }
    record::ExecuteVirtualRun(spec, run_options, result);
    const double sim_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    const bool ok = result.getStatus() == schema::RunStatus::OK;
    bool duplicate = false;
    s = store->MarkRunning(spec.getRunId(), 1, "virtual");
    if (s.ok()) s = store->CommitResult(result.asReader(), ok, &duplicate);
    if (!s.ok()) {
      spdlog::error("{}", s.message());
      return kExitError;
    }
    if (!ok) {
      ++failed;
      fmt::print("{:<36} {:>5}  failed: {}\n", spec.getLabel().cStr(), spec.getGpusNeeded(),
                 result.getError().cStr());
      continue;
    }
    const auto r = result.asReader().getRecord();
    if (r.getStopped() == schema::StopReason::OVERSATURATED) {
      saturated.Add(spec, r.getStopEvidence());
    }
    fmt::print("{:<36} {:>5} {:>9.2f} {:>11.1f} {:>10.1f} {:>10.2f} {:>9.1f}  {}\n",
               spec.getLabel().cStr(), spec.getGpusNeeded(), r.getRequestThroughput(),
               r.getOutputThroughput(), r.getTtftMs().getMedian(), r.getTpotMs().getMedian(),
               sim_ms,
               Standing(r.getCalibrationKind(), r.getCalibrationBandLowPct(),
                        r.getCalibrationBandHighPct()));
  }
  report::ReportPaths paths;
  if (s = report::WriteReports(*store, options.out_dir, &paths); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  fmt::print("summary: {}\nreport:  {}\nhtml:    {}\n", paths.summary_csv, paths.report_md,
             paths.report_html);
  return failed > 0 ? kExitRunsFailed : kExitOk;
}

}  // namespace

void AddPlanCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "Expand and check a matrix; print its runs");
  cmd->add_option("matrix", options->matrix_path, "Experiment matrix (YAML)")->required();
  auto* simulate =
      cmd->add_flag("--simulate", options->simulate,
                    "Run every run through the performance model in virtual time (needs --out)");
  cmd->add_option("--out", options->out_dir, "Output folder of the simulation")->needs(simulate);
  AddModelFlags(*cmd, options->model);
  cmd->add_flag("--json", options->json, "Print the plan as JSON");
  cmd->add_flag("--commands", options->commands,
                "Print, for each run and node, the engine command lines the agents would start "
                "(nodes named node0, node1, ...; the front end on port 8000)");
  cmd->add_flag("--check-engines", options->check_engines,
                "Hand every engine command line to the engine's own argument handling where it "
                "is installed (no weights, no GPU) and list what it rejects");
  AddEngineCheckFlags(*cmd, options->check, false);
  cmd->callback([options, exit_code] {
    matrix::LoadedMatrix matrix;
    if (Status s = matrix::LoadMatrixFile(options->matrix_path, &matrix); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    record::VirtualRunOptions run_options;
    if (Status s = VirtualRunOptionsFrom(options->model, &run_options); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    if (!options->simulate) {
      engines::SweepCheck check;
      if (options->check_engines) {
        if (Status s = CheckSweepEngines(matrix, options->check, &check); !s.ok()) {
          spdlog::error("{}", s.message());
          *exit_code = kExitError;
          return;
        }
      }
      *exit_code = PrintPlan(matrix, run_options, options->json, options->commands,
                             options->check_engines ? &check : nullptr);
      return;
    }
    if (options->out_dir.empty()) {
      spdlog::error("plan --simulate: expected --out DIR (where the results go), found none");
      *exit_code = kExitError;
      return;
    }
    *exit_code = Simulate(matrix, *options, run_options);
  });
}

}  // namespace servesweep::cli
