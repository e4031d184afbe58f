#include "agent/engine_processes.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/ids.h"

namespace servesweep::agent {

Status EngineGroup::Start(const engines::EngineLaunch& launch, const std::string& log_prefix) {
  for (const auto& process : launch.processes) {
    Member member;
    member.name = process.name;
    member.log_path = fmt::format("{}.{}.log", log_prefix, process.name);
    {
      // The exact command first, so the log says what ran (argv only: no environment values).
      std::ofstream header(member.log_path, std::ios::app);
      std::string command;
      for (const auto& arg : process.argv) command += (command.empty() ? "" : " ") + arg;
      header << "# servesweep started: " << command << "\n";
      if (!launch.flag_source.empty())
        header << "# flags spelled by: " << launch.flag_source << "\n";
    }
    if (Status s =
            ChildProcess::Spawn({process.argv, process.env, member.log_path, ""}, &member.process);
        !s.ok()) {
      Stop(std::chrono::seconds(5));
      return s.Prefixed("could not start " + process.name);
    }
    members_.push_back(std::move(member));
  }
  return Status::Ok();
}

std::vector<int> EngineGroup::Pgids() const {
  std::vector<int> pgids;
  for (const auto& member : members_) pgids.push_back(member.process.pid());
  return pgids;
}

bool EngineGroup::AnyExited() { return FirstExit().has_value(); }

std::optional<std::pair<std::string, int>> EngineGroup::FirstExit() {
  for (auto& member : members_) {
    if (!member.exit) member.exit = member.process.Poll();
  }
  for (const auto& member : members_) {
    if (member.exit) return std::make_pair(member.name, *member.exit);
  }
  return std::nullopt;
}

void EngineGroup::Signal(int signal) {
  for (auto& member : members_) member.process.Signal(signal);
}

void EngineGroup::Stop(std::chrono::milliseconds grace) {
  // The front end (last) first, so it stops sending to instances that are going away.
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) it->process.Stop(grace);
}

std::string EngineGroup::LogTail(size_t lines) const {
  if (members_.size() == 1) return TailOfFile(members_[0].log_path, lines);
  std::string out;
  for (const auto& member : members_) {
    out += fmt::format("==> {} <==\n{}", member.name, TailOfFile(member.log_path, lines));
    if (!out.empty() && out.back() != '\n') out += '\n';
  }
  return out;
}

std::string EngineGroup::LogPaths() const {
  std::string out;
  for (const auto& member : members_) out += (out.empty() ? "" : ", ") + member.log_path;
  return out;
}

Status CheckPrograms(const engines::EngineLaunch& launch, const std::string& agent_id) {
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "";
  for (const auto& process : launch.processes) {
    if (process.argv.empty()) return Status::InvalidArgument(process.name + ": empty command");
    const std::string& program = process.argv[0];
    if (program.find('/') != std::string::npos) {
      if (::access(program.c_str(), X_OK) != 0) {
        return Status::NotFound(
            fmt::format("{} is not an executable file on agent {}", program, agent_id));
      }
      continue;
    }
    bool found = false;
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':') && !found;) {
      found = !dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0;
    }
    if (!found) {
      return Status::NotFound(
          fmt::format("{} ({}) is not on the PATH of agent {}; install the engine there "
                      "(llama.cpp: scripts/install-engines.sh)",
                      program, process.name, agent_id));
    }
  }
  return Status::Ok();
}

std::string FingerprintFile(const std::string& path) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) return "";
  constexpr uint64_t kWhole = uint64_t{1} << 30, kHead = uint64_t{64} << 20;
  std::ifstream in(path, std::ios::binary);
  std::string data(bytes <= kWhole ? bytes : kHead, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (!in) return "";
  return fmt::format("fnv1a64:{}{} {} {} bytes", StableHashHex(data),
                     bytes <= kWhole ? "" : " (first 64 MiB)", path, bytes);
}

void ParseVersionOutput(const std::string& output, std::string* version, std::string* commit) {
  std::stringstream lines(output);
  std::string first, line;
  while (std::getline(lines, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    if (first.empty()) first = line;
    if (line.find("version") != std::string::npos) {
      first = line;
      break;
    }
  }
  if (first.rfind("version: ", 0) == 0) first = first.substr(9);
  *version = first.substr(0, 200);
  const size_t open = first.find('('), close = first.find(')', open);
  if (open != std::string::npos && close != std::string::npos) {
    std::string inside = first.substr(open + 1, close - open - 1);
    // llama.cpp: "0.6.0-dev (build 0, commit unknown)"; others: "1 (4ba787ec9)".
    if (const size_t at = inside.find("commit "); at != std::string::npos) {
      inside = inside.substr(at + 7);
    }
    *commit = inside;
  }
}

void ReadProvenance(const engines::EngineLaunch& launch, const std::string& log_prefix,
                    record::NodeFacts* node) {
  if (!launch.model_file.empty()) node->model_fingerprint = FingerprintFile(launch.model_file);
  if (launch.version_command.empty() || !node->engine_version.empty()) return;
  engines::EngineLaunch probe;
  probe.processes.push_back({"version", launch.version_command, {}});
  if (!CheckPrograms(probe, "").ok()) return;
  const std::string log_path = log_prefix + ".version.log";
  std::error_code ec;
  std::filesystem::remove(log_path, ec);
  ChildProcess process;
  if (!ChildProcess::Spawn({launch.version_command, {}, log_path, ""}, &process).ok()) return;
  const auto status = process.Wait(std::chrono::seconds(30));
  if (!status) {
    process.Stop(std::chrono::seconds(1));
    return;
  }
  std::ifstream in(log_path);
  std::stringstream text;
  text << in.rdbuf();
  ParseVersionOutput(text.str(), &node->engine_version, &node->engine_commit);
  if (std::string nccl = ParseNcclLine(text.str()); !nccl.empty()) node->nccl_version = nccl;
}

std::string ParseNcclLine(const std::string& output) {
  std::stringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.rfind("nccl: ", 0) == 0 && line.size() > 6) return line.substr(6, 100);
  }
  return "";
}

}  // namespace servesweep::agent
