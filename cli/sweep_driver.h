// Drives a coordinator through a whole sweep: prepare the database, bind, run until every run is
// done or failed, write the reports, print where they are. Shared by `servesweep coordinator`
// (remote agents) and `servesweep run` (local agents it starts itself via after_bind).
//
// Thread-safety: call from the main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "coordinator/coordinator.h"
#include "matrix/matrix_loader.h"

namespace servesweep::cli {

// How the driver shows the sweep, beside the coordinator's own settings.
struct DriverOptions {
  std::string progress = "auto";  // --progress: auto, live, plain, off (progress_display.h)
};

// Returns the process exit code (commands.h). Runs' progress goes to stdout: live lines when it
// is a terminal (and `--progress auto`), plain lines otherwise.
int DriveSweep(coordinator::CoordinatorSettings settings, const DriverOptions& options,
               matrix::LoadedMatrix& matrix,
               const std::function<bool(const std::string& endpoint)>& after_bind);

// Adds the options every coordinator-owning command shares.
void AddCoordinatorOptions(CLI::App& cmd, coordinator::CoordinatorSettings& settings,
                           DriverOptions& options);

}  // namespace servesweep::cli
