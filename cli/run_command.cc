// `servesweep run MATRIX --out DIR`: the one-command default. An embedded coordinator on a
// loopback port, local agents started as child processes (each a real `servesweep agent`
// speaking ZeroMQ), engines started by those agents; reports at the end.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/sweep_driver.h"
#include "common/subprocess.h"
#include "coordinator/placement.h"

namespace servesweep::cli {
namespace {

struct RunOptions {
  coordinator::CoordinatorSettings settings;
  std::string matrix_path;
  uint32_t agents = 0;          // 0 = the matrix's `local.agents`
  uint32_t gpus_per_agent = 0;  // 0 = the matrix's `local.gpus_per_agent`
};

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Run a sweep here: coordinator, local agents, engines");
  cmd->add_option("matrix", o->matrix_path, "Experiment matrix (YAML)")->required();
  AddCoordinatorOptions(*cmd, o->settings);
  cmd->add_option("--agents", o->agents,
                  "Local agents to start (default: the matrix's local.agents)");
  cmd->add_option("--gpus-per-agent", o->gpus_per_agent,
                  "Emulated GPUs per local agent (default: the matrix's local.gpus_per_agent)");
  cmd->callback([o, exit_code] {
    coordinator::LoadedMatrix matrix;
    if (Status s = coordinator::LoadMatrixFile(o->matrix_path, &matrix); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    const uint32_t agents = o->agents > 0 ? o->agents : matrix.local.agents;
    const uint32_t gpus = o->gpus_per_agent > 0 ? o->gpus_per_agent : matrix.local.gpus_per_agent;
    // Refuse up front a run the local agents could never hold: nothing is started.
    const std::vector<uint32_t> local_gpus(agents, gpus);
    for (auto spec : matrix.matrix().getRuns()) {
      if (!coordinator::CouldEverPlace(spec, local_gpus)) {
        spdlog::error(
            "{}: run {} [{}] needs {} GPUs; expected it to fit on {} local agent(s) of "
            "{} GPU(s) (set local.agents / --agents)",
            o->matrix_path, spec.getRunId().cStr(), spec.getLabel().cStr(), spec.getGpusNeeded(),
            agents, gpus);
        *exit_code = kExitError;
        return;
      }
    }
    o->settings.bind = "tcp://127.0.0.1:*";
    std::vector<ChildProcess> children;
    auto start_agents = [&](const std::string& endpoint) {
      for (uint32_t i = 0; i < agents; ++i) {
        const std::string id = fmt::format("local-{}", i);
        const std::string home = fmt::format("{}/agents/{}", o->settings.out_dir, id);
        std::filesystem::create_directories(home);
        SpawnOptions spawn;
        spawn.argv = {SelfExecutable(), "agent",
                      "--connect",      endpoint,
                      "--id",           id,
                      "--spool",        home + "/spool",
                      "--work-dir",     home + "/work",
                      "--emulate-gpus", std::to_string(gpus),
                      "--heartbeat-ms", std::to_string(o->settings.heartbeat_ms),
                      "--liveness",     std::to_string(o->settings.liveness)};
        spawn.log_path = home + "/agent.log";
        ChildProcess child;
        if (Status s = ChildProcess::Spawn(spawn, &child); !s.ok()) {
          spdlog::error("{}", s.message());
          return false;
        }
        children.push_back(std::move(child));
      }
      spdlog::info("started {} local agent(s) with {} emulated GPU(s) each; logs in {}/agents",
                   agents, gpus, o->settings.out_dir);
      return true;
    };
    *exit_code = DriveSweep(o->settings, matrix, start_agents);
    // Agents leave on the coordinator's bye; any that did not are stopped.
    for (auto& child : children) {
      if (!child.Wait(std::chrono::seconds(5))) child.Stop(std::chrono::seconds(2));
    }
  });
}

}  // namespace servesweep::cli
