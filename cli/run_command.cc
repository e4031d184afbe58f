// `servesweep run MATRIX --out DIR`: the one-command default. An embedded coordinator on a
// loopback port, local agents started as child processes (each a real `servesweep agent`
// speaking ZeroMQ), engines started by those agents; reports at the end.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_checks.h"
#include "cli/local_sweep.h"

namespace servesweep::cli {
namespace {

struct RunOptions {
  coordinator::CoordinatorSettings settings;
  DriverOptions driver;
  std::string matrix_path;
  uint32_t agents = 0;          // 0 = the matrix's `local.agents`
  uint32_t gpus_per_agent = 0;  // 0 = the matrix's `local.gpus_per_agent`
  EngineCheckFlags check;
};

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Run a sweep here: coordinator, local agents, engines");
  cmd->add_option("matrix", o->matrix_path, "Experiment matrix (YAML)")->required();
  AddCoordinatorOptions(*cmd, o->settings, o->driver);
  cmd->add_option("--agents", o->agents,
                  "Local agents to start (default: the matrix's local.agents)");
  cmd->add_option("--gpus-per-agent", o->gpus_per_agent,
                  "Emulated GPUs per local agent (default: the matrix's local.gpus_per_agent)");
  cmd->add_flag("--insecure", o->settings.insecure,
                "Plain TCP between the coordinator and its local agents (default: CurveZMQ with "
                "keys made for this run)");
  cmd->add_flag("--skip-engine-check", o->check.skip,
                "Start the sweep without handing its engine command lines to the engines' own "
                "argument handling first (here, and by the agents before each engine)");
  cmd->callback([o, exit_code] {
    matrix::LoadedMatrix matrix;
    if (Status s = matrix::LoadMatrixFile(o->matrix_path, &matrix); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    const uint32_t agents = o->agents > 0 ? o->agents : matrix.local.agents;
    const uint32_t gpus = o->gpus_per_agent > 0 ? o->gpus_per_agent : matrix.local.gpus_per_agent;
    if (const int code = RefuseUnplaceable(matrix, o->matrix_path, agents, gpus); code >= 0) {
      *exit_code = code;
      return;
    }
    // The engines installed here are the ones the local agents start: their own argument
    // handling refuses a command line before any agent starts.
    if (const int code = RefuseRejectedSweep(matrix, o->check); code >= 0) {
      *exit_code = code;
      return;
    }
    LocalSweepOptions local;
    local.settings = o->settings;
    local.driver = o->driver;
    local.agents = agents;
    local.gpus_per_agent = gpus;
    local.skip_engine_check = o->check.skip;
    *exit_code = RunLocalSweep(local, matrix);
  });
}

}  // namespace servesweep::cli
