// Test harness for end-to-end tests: starts `servesweep` subcommands as real processes, writes
// matrices to a scratch folder, waits for conditions, and reads the results database.
//
// Thread-safety: one harness per test; not shared between threads.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/net.h"
#include "common/subprocess.h"
#include "results/results_store.h"
#include "testing/process_helpers.h"
#include "testing/scratch_dir.h"

namespace servesweep::testing {

// The servesweep binary under test (set by CMake).
std::string ServesweepBinary();

class Harness {
 public:
  explicit Harness(const std::string& name);
  ~Harness();  // stops every process still running

  const std::string& dir() const { return scratch_.dir(); }
  std::string Path(const std::string& name) const { return scratch_.Path(name); }
  std::string WriteFile(const std::string& name, const std::string& text) const {
    return scratch_.WriteFile(name, text);
  }

  // CurveZMQ key files in dir/keys, made on first use (servesweep keygen's format): NAME.secret
  // and NAME.pub. The arguments a coordinator needs to admit the "agent" key, and those an
  // agent holding the "agent" key needs to reach that coordinator.
  std::string KeyPath(const std::string& name, const std::string& ext) const;
  std::vector<std::string> CoordinatorKeyArgs();
  std::vector<std::string> AgentKeyArgs(const std::string& agent_key = "agent",
                                        const std::string& server_key = "coordinator");

  // Starts `servesweep args...`, output to dir/<log_name>.log. Returns its index. A `wrapper`
  // runs first and execs servesweep (e.g. {"ip", "netns", "exec", "NS"}: the process is then
  // servesweep itself, so its signals reach it).
  size_t Start(const std::string& log_name, std::vector<std::string> args,
               const std::vector<std::string>& wrapper = {});
  ChildProcess& process(size_t index) { return *processes_[index]; }
  std::string Log(const std::string& log_name) const;

  // Polls `condition` every 20 ms until true or `timeout`; returns whether it became true.
  static bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);
  // Waits until `base_url`/health answers 200 (an emulator or engine is up), 10 s at most.
  static bool WaitForHealthy(const std::string& base_url);

  // Rows of `sql` against dir/out/results.db (opened fresh each call); none while the database
  // or its tables do not exist yet, or the query fails (the reason on stderr).
  results::Table Query(const std::string& out_dir, const std::string& sql) const;
  int64_t QueryInt(const std::string& out_dir, const std::string& sql) const;

 private:
  ScratchDir scratch_;  // kept when the test failed
  std::vector<std::unique_ptr<ChildProcess>> processes_;
};

// The real engine of the CPU tests, as scripts/install-engines.sh installs it: llama-server on
// PATH and this model.
constexpr const char* kSmolLm2Gguf =
    "/opt/servesweep-engines/models/SmolLM2-135M-Instruct.Q4_1.gguf";
// Whether an executable `program` is in a folder of $PATH.
bool OnPath(const std::string& program);

// Runs `servesweep <args>` to completion; returns its exit code (-1 if it did not exit), its
// stdout and stderr together in *output.
int RunServesweep(const std::string& args, std::string* output);

// A small, quick sim matrix: `runs` runs differing in concurrency only; every request lasts
// about ttft + (output_len - 1) * itl.
std::string SimMatrix(const std::string& name, int runs, int num_requests, int concurrency,
                      int output_len, double ttft_ms, double itl_ms, int tp = 1);

}  // namespace servesweep::testing
