// `servesweep run MATRIX --out DIR`: the one-command default. An embedded coordinator on a
// loopback port, local agents started as child processes (each a real `servesweep agent`
// speaking ZeroMQ), engines started by those agents; reports at the end.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_checks.h"
#include "cli/sweep_driver.h"
#include "common/subprocess.h"
#include "matrix/feasibility.h"
#include "transport/curve_keys.h"

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
    // Refuse up front a run the local agents could never hold: nothing is started.
    const std::vector<uint32_t> local_gpus(agents, gpus);
    for (auto spec : matrix.matrix().getRuns()) {
      if (!matrix::CouldEverPlace(spec, local_gpus)) {
        spdlog::error(
            "{}: run {} [{}] needs {} GPUs; expected it to fit on {} local agent(s) of "
            "{} GPU(s) (set local.agents / --agents)",
            o->matrix_path, spec.getRunId().cStr(), spec.getLabel().cStr(), spec.getGpusNeeded(),
            agents, gpus);
        *exit_code = kExitError;
        return;
      }
    }
    // The engines installed here are the ones the local agents start: their own argument
    // handling refuses a command line before any agent starts.
    if (const int code = RefuseRejectedSweep(matrix, o->check); code >= 0) {
      *exit_code = code;
      return;
    }
    o->settings.bind = "tcp://127.0.0.1:*";
    // Secure by default with no user steps: keys made for this run, the agents' secret handed
    // over in a 0600 file (not argv, which any local user can read), deleted at the end.
    CurveKeypair server_keys, agent_keys;
    const std::string keys_dir = o->settings.out_dir + "/.keys";
    if (!o->settings.insecure) {
      Status s = GenerateCurveKeypair(&server_keys);
      if (s.ok()) s = GenerateCurveKeypair(&agent_keys);
      if (!s.ok()) {
        spdlog::error("{}", s.message());
        *exit_code = kExitError;
        return;
      }
      o->settings.curve_secret_z85 = server_keys.secret_z85;
      o->settings.allowed_agent_keys_z85 = {agent_keys.public_z85};
    }
    std::vector<ChildProcess> children;
    auto start_agents = [&](const std::string& endpoint) {
      std::vector<std::string> security = {"--insecure"};
      if (!o->settings.insecure) {
        std::error_code ignored;
        std::filesystem::remove_all(keys_dir, ignored);  // left by a sweep that was killed
        Status s = WriteCurveKeypair(keys_dir, "agent", agent_keys);
        if (!s.ok()) {
          spdlog::error("{}", s.message());
          return false;
        }
        std::ofstream(keys_dir + "/coordinator.pub") << server_keys.public_z85 << "\n";
        security = {"--server-key", keys_dir + "/coordinator.pub", "--secret-key",
                    keys_dir + "/agent.secret"};
      }
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
        spawn.argv.insert(spawn.argv.end(), security.begin(), security.end());
        if (o->check.skip) spawn.argv.push_back("--skip-engine-check");
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
    *exit_code = DriveSweep(o->settings, o->driver, matrix, start_agents);
    // Agents leave on the coordinator's bye; any that did not are stopped.
    for (auto& child : children) {
      if (!child.Wait(std::chrono::seconds(5))) child.Stop(std::chrono::seconds(2));
    }
    std::error_code ignored;
    std::filesystem::remove_all(keys_dir, ignored);
  });
}

}  // namespace servesweep::cli
