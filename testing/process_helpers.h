// Helpers for tests, benchmarks and fuzz replays that run or read things: child processes' exit
// codes, shell commands, argument lists, files of the source tree. No GoogleTest here, so bench/
// and fuzz/ link it too.
//
// Thread-safety: free functions; safe from any thread (RunShell uses popen).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace servesweep::testing {

// Waits up to `timeout` for a started process; its exit code (128 + signal when killed), or -1
// when it is still running.
int ExitCode(ChildProcess& process, std::chrono::milliseconds timeout);

// `a` followed by `b` (argument lists).
std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b);

// Runs a shell command line; returns its wait status, its stdout and stderr in *output.
int RunShell(const std::string& command, std::string* output);

// The whole text of a file ("" if unreadable).
std::string ReadTextFile(const std::string& path);

// The text of a file of the source tree, e.g. "tests/golden/slurm_gpu.sbatch".
std::string ReadSourceFile(const std::string& path);

}  // namespace servesweep::testing
