#include "cli/local_agents.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>

namespace servesweep::cli {

LocalAgents::~LocalAgents() { Stop(std::chrono::seconds(0)); }

Status LocalAgents::Configure(coordinator::CoordinatorSettings* settings) {
  settings->bind = endpoint_.empty() ? "tcp://127.0.0.1:*" : endpoint_;
  settings->insecure = options_.insecure;
  if (options_.insecure) return Status::Ok();
  // Secure by default with no user steps: keys made for these agents, the agents' secret
  // handed over in a 0600 file (not argv, which any local user can read), deleted at Stop().
  if (!keys_made_) {
    Status s = GenerateCurveKeypair(&server_keys_);
    if (s.ok()) s = GenerateCurveKeypair(&agent_keys_);
    if (!s.ok()) return s;
    keys_made_ = true;
  }
  settings->curve_secret_z85 = server_keys_.secret_z85;
  settings->allowed_agent_keys_z85 = {agent_keys_.public_z85};
  return Status::Ok();
}

Status LocalAgents::StartFor(const std::string& endpoint) {
  if (!endpoint_.empty()) {
    // Kept from the sweep before: an agent that has exited since (it crashed, or was killed)
    // is started again, or this sweep would wait for it forever.
    for (uint32_t i = 0; i < children_.size(); ++i) {
      if (const auto status = children_[i].Poll()) {
        spdlog::warn("local agent local-{} had exited ({}); starting it again", i,
                     DescribeExit(*status));
        if (Status s = Spawn(i, &children_[i]); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }
  const std::string keys_dir = options_.home + "/.keys";
  security_ = {"--insecure"};
  if (!options_.insecure) {
    std::error_code ignored;
    std::filesystem::remove_all(keys_dir, ignored);  // left by a sweep that was killed
    if (Status s = WriteCurveKeypair(keys_dir, "agent", agent_keys_); !s.ok()) return s;
    std::ofstream(keys_dir + "/coordinator.pub") << server_keys_.public_z85 << "\n";
    security_ = {"--server-key", keys_dir + "/coordinator.pub", "--secret-key",
                 keys_dir + "/agent.secret"};
  }
  endpoint_ = endpoint;
  children_.resize(options_.agents);
  for (uint32_t i = 0; i < options_.agents; ++i) {
    if (Status s = Spawn(i, &children_[i]); !s.ok()) return s;
  }
  spdlog::info("started {} local agent(s) with {} emulated GPU(s) each; logs in {}/agents",
               options_.agents, options_.gpus_per_agent, options_.home);
  return Status::Ok();
}

Status LocalAgents::Spawn(uint32_t i, ChildProcess* out) const {
  const std::string id = fmt::format("local-{}", i);
  const std::string home = fmt::format("{}/agents/{}", options_.home, id);
  std::filesystem::create_directories(home);
  SpawnOptions spawn;
  spawn.argv = {SelfExecutable(), "agent",
                "--connect",      endpoint_,
                "--id",           id,
                "--spool",        home + "/spool",
                "--work-dir",     home + "/work",
                "--emulate-gpus", std::to_string(options_.gpus_per_agent),
                "--heartbeat-ms", std::to_string(options_.heartbeat_ms),
                "--liveness",     std::to_string(options_.liveness)};
  spawn.argv.insert(spawn.argv.end(), security_.begin(), security_.end());
  if (options_.skip_engine_check) spawn.argv.push_back("--skip-engine-check");
  spawn.log_path = home + "/agent.log";
  return ChildProcess::Spawn(spawn, out);
}

void LocalAgents::Stop(std::chrono::seconds wait_for_bye) {
  const auto deadline = std::chrono::steady_clock::now() + wait_for_bye;
  for (auto& child : children_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (child.started() && !child.Wait(std::max(left, std::chrono::milliseconds(0)))) {
      child.Signal(SIGTERM);  // all at once: each stops its kept engine meanwhile
    }
  }
  // SIGTERM's grace covers an agent stopping its kept engine (ServingEngine: 10 s at most).
  for (auto& child : children_) child.Stop(std::chrono::seconds(12));
  children_.clear();
  endpoint_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(options_.home + "/.keys", ignored);
}

}  // namespace servesweep::cli
