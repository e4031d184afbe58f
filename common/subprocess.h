// Child processes: engines started by agents and agents started by `servesweep run`. Each child
// gets its own process group (so teardown reaches everything it forked) and dies with its parent
// (PR_SET_PDEATHSIG), so a killed agent leaves no engine behind holding ports or GPUs.
//
// Thread-safety: a ChildProcess is owned by one thread. Spawn() may be called from any thread
// (it only uses async-signal-safe calls between fork and exec).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace servesweep {

struct SpawnOptions {
  std::vector<std::string> argv;                         // argv[0] is the program (PATH lookup)
  std::vector<std::pair<std::string, std::string>> env;  // added to the inherited environment
  std::string log_path;     // stdout+stderr appended here; "" = inherit
  std::string stderr_path;  // stderr apart; "" = with stdout
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // kills the group if still running
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Forks on a thread that lives as long as the process (the child dies with the process, and
  // outlives the thread that asked for it).
  static Status Spawn(const SpawnOptions& options, ChildProcess* out);

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  // Non-blocking: the exit status if the child has ended (reaped once).
  std::optional<int> Poll();
  // Waits up to `timeout`; returns the exit status or nullopt if still running.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM to the whole group, then SIGKILL after `grace`; reaps the child.
  int Stop(std::chrono::milliseconds grace);
  // Sends `signal` to the child's group.
  void Signal(int signal);

 private:
  static Status SpawnHere(const SpawnOptions& options, ChildProcess* out);
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

// Shell-style exit description: "exit 3", "signal 9".
std::string DescribeExit(int wait_status);

// Path of the running executable (/proc/self/exe), to start subcommands of ourselves.
std::string SelfExecutable();

// Last `max_lines` lines of a text file (for failure records); "" if unreadable.
std::string TailOfFile(const std::string& path, size_t max_lines);

}  // namespace servesweep
