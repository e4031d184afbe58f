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
#include "coordinator/matrix_loader.h"

namespace servesweep::cli {

// Returns the process exit code (commands.h).
int DriveSweep(coordinator::CoordinatorSettings settings, coordinator::LoadedMatrix& matrix,
               const std::function<bool(const std::string& endpoint)>& after_bind);

// Adds the options every coordinator-owning command shares.
void AddCoordinatorOptions(CLI::App& cmd, coordinator::CoordinatorSettings& settings);

}  // namespace servesweep::cli
