#include "cli/local_sweep.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "cli/commands.h"
#include "common/subprocess.h"
#include "matrix/feasibility.h"
#include "transport/curve_keys.h"

namespace servesweep::cli {

int RefuseUnplaceable(matrix::LoadedMatrix& matrix, const std::string& path, uint32_t agents,
                      uint32_t gpus_per_agent) {
  const std::vector<uint32_t> local_gpus(agents, gpus_per_agent);
  for (auto spec : matrix.matrix().getRuns()) {
    if (!matrix::CouldEverPlace(spec, local_gpus)) {
      spdlog::error(
          "{}: run {} [{}] needs {} GPUs; expected it to fit on {} local agent(s) of {} GPU(s) "
          "(set local.agents / --agents)",
          path, spec.getRunId().cStr(), spec.getLabel().cStr(), spec.getGpusNeeded(), agents,
          gpus_per_agent);
      return kExitError;
    }
  }
  return -1;
}

int RunLocalSweep(LocalSweepOptions options, matrix::LoadedMatrix& matrix) {
  options.settings.bind = "tcp://127.0.0.1:*";
  // Secure by default with no user steps: keys made for this run, the agents' secret handed
  // over in a 0600 file (not argv, which any local user can read), deleted at the end.
  CurveKeypair server_keys, agent_keys;
  const std::string keys_dir = options.settings.out_dir + "/.keys";
  if (!options.settings.insecure) {
    Status s = GenerateCurveKeypair(&server_keys);
    if (s.ok()) s = GenerateCurveKeypair(&agent_keys);
    if (!s.ok()) {
      spdlog::error("{}", s.message());
      return kExitError;
    }
    options.settings.curve_secret_z85 = server_keys.secret_z85;
    options.settings.allowed_agent_keys_z85 = {agent_keys.public_z85};
  }
  std::vector<ChildProcess> children;
  auto start_agents = [&](const std::string& endpoint) {
    std::vector<std::string> security = {"--insecure"};
    if (!options.settings.insecure) {
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
    for (uint32_t i = 0; i < options.agents; ++i) {
      const std::string id = fmt::format("local-{}", i);
      const std::string home = fmt::format("{}/agents/{}", options.settings.out_dir, id);
      std::filesystem::create_directories(home);
      SpawnOptions spawn;
      spawn.argv = {SelfExecutable(), "agent",
                    "--connect",      endpoint,
                    "--id",           id,
                    "--spool",        home + "/spool",
                    "--work-dir",     home + "/work",
                    "--emulate-gpus", std::to_string(options.gpus_per_agent),
                    "--heartbeat-ms", std::to_string(options.settings.heartbeat_ms),
                    "--liveness",     std::to_string(options.settings.liveness)};
      spawn.argv.insert(spawn.argv.end(), security.begin(), security.end());
      if (options.skip_engine_check) spawn.argv.push_back("--skip-engine-check");
      spawn.log_path = home + "/agent.log";
      ChildProcess child;
      if (Status s = ChildProcess::Spawn(spawn, &child); !s.ok()) {
        spdlog::error("{}", s.message());
        return false;
      }
      children.push_back(std::move(child));
    }
    spdlog::info("started {} local agent(s) with {} emulated GPU(s) each; logs in {}/agents",
                 options.agents, options.gpus_per_agent, options.settings.out_dir);
    return true;
  };
  const int code = DriveSweep(options.settings, options.driver, matrix, start_agents);
  // Agents leave on the coordinator's bye; any that did not are stopped.
  for (auto& child : children) {
    if (!child.Wait(std::chrono::seconds(5))) child.Stop(std::chrono::seconds(2));
  }
  std::error_code ignored;
  std::filesystem::remove_all(keys_dir, ignored);
  return code;
}

}  // namespace servesweep::cli
