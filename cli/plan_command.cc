// `servesweep plan MATRIX`: the expanded run list, with the GPUs each run needs, before anything
// starts. (GPU-hour estimates and engine command lines come with the matrix work.)
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "coordinator/matrix_loader.h"

namespace servesweep::cli {

void AddPlanCommand(CLI::App& app, int* exit_code) {
  auto matrix_path = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("plan", "Expand and check a matrix; print its runs");
  cmd->add_option("matrix", *matrix_path, "Experiment matrix (YAML)")->required();
  cmd->callback([matrix_path, exit_code] {
    coordinator::LoadedMatrix matrix;
    if (Status s = coordinator::LoadMatrixFile(*matrix_path, &matrix); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    const auto runs = matrix.matrix().getRuns();
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
    *exit_code = kExitOk;
  });
}

}  // namespace servesweep::cli
