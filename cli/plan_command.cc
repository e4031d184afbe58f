// `servesweep plan MATRIX`: the expanded run list, with the GPUs each run needs, before anything
// starts. `--simulate --out DIR` runs every run through the performance model in virtual time
// and writes the results database and reports a sweep would (every figure marked simulated).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "agent/virtual_run.h"
#include "cli/commands.h"
#include "coordinator/matrix_loader.h"
#include "coordinator/report.h"
#include "coordinator/results_store.h"

namespace servesweep::cli {
namespace {

struct PlanOptions {
  std::string matrix_path;
  bool simulate = false;
  std::string out_dir;
  std::string hardware;
};

void PrintRuns(schema::Matrix::Reader matrix) {
  const auto runs = matrix.getRuns();
  fmt::print("{:<28} {:<8} {:>5} {:>9} {:>8} {:>7}  {}\n", "run", "engine", "GPUs", "requests",
             "in/out", "conc.", "label");
  uint64_t gpus = 0;
  for (auto spec : runs) {
    const auto w = spec.getWorkload();
    fmt::print("{:<28} {:<8} {:>5} {:>9} {:>8} {:>7}  {}\n", spec.getRunId().cStr(),
               spec.getEngine().cStr(), spec.getGpusNeeded(), w.getNumRequests(),
               fmt::format("{}/{}", w.getInputLenTok(), w.getOutputLenTok()),
               w.getRequestRatePerS() > 0 ? fmt::format("{}/s", w.getRequestRatePerS())
                                          : std::to_string(w.getConcurrency()),
               spec.getLabel().cStr());
    gpus = std::max<uint64_t>(gpus, spec.getGpusNeeded());
  }
  fmt::print("{} runs; the largest needs {} GPU(s)\n", runs.size(), gpus);
}

// Every run through the model, committed to DIR/results.db as a sweep would; then the reports.
int Simulate(coordinator::LoadedMatrix& loaded, const PlanOptions& options) {
  namespace fs = std::filesystem;
  const std::string db = options.out_dir + "/results.db";
  if (fs::exists(db)) {
    spdlog::error("{}: expected a new output folder for a simulation, found a results database",
                  db);
    return kExitError;
  }
  fs::create_directories(options.out_dir);
  std::unique_ptr<coordinator::ResultsStore> store;
  Status s = coordinator::ResultsStore::Open(db, &store);
  const auto matrix = loaded.matrix();
  if (s.ok()) s = store->InitSweep(matrix, loaded.text);
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  fmt::print("SIMULATED (performance model, virtual time; docs/perfmodel.md)\n");
  fmt::print("{:<36} {:>5} {:>9} {:>11} {:>10} {:>10} {:>9}\n", "run", "GPUs", "req/s", "out tok/s",
             "TTFT p50", "TPOT p50", "sim ms");
  size_t failed = 0;
  for (auto spec : matrix.getRuns()) {
    const auto started = std::chrono::steady_clock::now();
    capnp::MallocMessageBuilder message;
    auto result = message.initRoot<schema::RunResult>();
    agent::ExecuteVirtualRun(spec, options.hardware, result);
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
    fmt::print("{:<36} {:>5} {:>9.2f} {:>11.1f} {:>10.1f} {:>10.2f} {:>9.1f}\n",
               spec.getLabel().cStr(), spec.getGpusNeeded(), r.getRequestThroughput(),
               r.getOutputThroughput(), r.getTtftMs().getMedian(), r.getTpotMs().getMedian(),
               sim_ms);
  }
  coordinator::ReportPaths paths;
  if (s = coordinator::WriteReports(*store, options.out_dir, &paths); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  fmt::print("summary: {}\nreport:  {}\n", paths.summary_csv, paths.report_md);
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
  cmd->add_option("--hardware", options->hardware,
                  "Hardware profile for runs whose matrix names none (e.g. h200, or a YAML path)")
      ->needs(simulate);
  cmd->callback([options, exit_code] {
    coordinator::LoadedMatrix matrix;
    if (Status s = coordinator::LoadMatrixFile(options->matrix_path, &matrix); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    if (!options->simulate) {
      PrintRuns(matrix.matrix());
      *exit_code = kExitOk;
      return;
    }
    if (options->out_dir.empty()) {
      spdlog::error("plan --simulate: expected --out DIR (where the results go), found none");
      *exit_code = kExitError;
      return;
    }
    *exit_code = Simulate(matrix, *options);
  });
}

}  // namespace servesweep::cli
