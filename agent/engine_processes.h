// The processes of one engine deployment on this agent (an engine, or prefill and decode
// instances and their router), each in its own process group with its own log; and what the
// record says about them (provenance: the engine's version, the model file's fingerprint).
//
// Thread-safety: an EngineGroup is owned by one thread (the run thread); Cancel() reaches its
// groups through the pgids the executor keeps, never through the group itself.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "engines/engine_adapter.h"
#include "record/record_builder.h"

namespace servesweep::agent {

class EngineGroup {
 public:
  // Starts `launch.processes` in order, logs to `<log_prefix>.<name>.log` ("engine" keeps the
  // single-process name `<log_prefix>.engine.log`). On failure, stops what was started.
  Status Start(const engines::EngineLaunch& launch, const std::string& log_prefix);
  std::vector<int> Pgids() const;
  bool AnyExited();
  // The first process that ended: its name and wait status.
  std::optional<std::pair<std::string, int>> FirstExit();
  void Signal(int signal);
  void Stop(std::chrono::milliseconds grace);
  // The last lines of each log (prefixed with the process name when there are several).
  std::string LogTail(size_t lines) const;
  std::string LogPaths() const;

 private:
  struct Member {
    std::string name;
    std::string log_path;
    ChildProcess process;
    std::optional<int> exit;
  };
  std::vector<Member> members_;
};

// Fails when a program of `launch` (argv[0] without a '/') is not on PATH, naming it.
Status CheckPrograms(const engines::EngineLaunch& launch, const std::string& agent_id);

// Runs the launch's version command (30 s at most; its output in `<log_prefix>.version.log`)
// for the engine's version, commit and (Python engines) the NCCL its torch loads, and
// fingerprints its model file into `node`. Never fails the run: what it cannot tell stays
// empty and the record says so.
void ReadProvenance(const engines::EngineLaunch& launch, const std::string& log_prefix,
                    record::NodeFacts* node);

// The NCCL version a version command printed on a line "nccl: 2.21.5" ("" when none).
std::string ParseNcclLine(const std::string& output);

// "fnv1a64:<hex> <file> <bytes> bytes": the whole file up to 1 GiB, else its first 64 MiB and size.
std::string FingerprintFile(const std::string& path);

// Parses a version command's output: the first line naming a version, and a commit in (...).
void ParseVersionOutput(const std::string& output, std::string* version, std::string* commit);

}  // namespace servesweep::agent
