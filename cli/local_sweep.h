// One sweep on this machine: an embedded coordinator on a loopback port, local agents
// (cli/local_agents.h) started as child processes, engines started by those agents. Shared by
// `run` (the matrix's sweep, its own agents) and `search` (each round's runs, on agents and
// engines kept across rounds).
//
// Thread-safety: call from the main thread.
#pragma once

#include <cstdint>
#include <string>

#include "cli/local_agents.h"
#include "cli/sweep_driver.h"
#include "coordinator/coordinator.h"
#include "matrix/matrix_loader.h"

namespace servesweep::cli {

struct LocalSweepOptions {
  coordinator::CoordinatorSettings settings;  // out_dir set; bind is made loopback here
  DriverOptions driver;
  uint32_t agents = 1;
  uint32_t gpus_per_agent = 1;     // emulated GPUs per agent
  bool skip_engine_check = false;  // the agents' own check before each engine
  // Agents kept across sweeps (not owned): this sweep says another follows, and they stay with
  // their engines; null: agents of this sweep alone, in out_dir/agents, gone at its end.
  LocalAgents* kept_agents = nullptr;
};

// The agents `options` asks for, living in its out_dir.
LocalAgentsOptions AgentsOptionsOf(const LocalSweepOptions& options);

// A run of `matrix` (read from `path`) that `agents` local agents of `gpus_per_agent` GPUs could
// never hold: refused up front, nothing started (kExitError after saying which); -1 to go on.
int RefuseUnplaceable(matrix::LoadedMatrix& matrix, const std::string& path, uint32_t agents,
                      uint32_t gpus_per_agent);

// Returns the process exit code (commands.h), as DriveSweep.
int RunLocalSweep(LocalSweepOptions options, matrix::LoadedMatrix& matrix);

}  // namespace servesweep::cli
