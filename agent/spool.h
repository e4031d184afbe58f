// The agent's spool: every result is written here (fsync'd, atomically renamed) before it is
// sent, and deleted only when the coordinator acknowledges its commit. A crash anywhere between
// measuring and committing therefore loses nothing; a resent result is recognised by its run id.
//
// Thread-safety: not thread-safe; owned by the agent's loop.
#pragma once

#include <capnp/message.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace servesweep::agent {

struct SpooledResult {
  std::string run_id;
  uint32_t attempt = 0;
  std::string path;
};

class Spool {
 public:
  explicit Spool(std::string dir) : dir_(std::move(dir)) {}
  Status Init();
  // Writes a RunResult message; fails (e.g. disk full) without leaving a partial file.
  Status Write(const std::string& run_id, uint32_t attempt, capnp::MessageBuilder& result);
  std::vector<SpooledResult> List() const;
  // The file's bytes (a serialised RunResult message).
  Status Read(const SpooledResult& entry, std::string* bytes) const;
  void Remove(const std::string& run_id, uint32_t attempt);
  // Moves a result the coordinator rejected (another sweep's) to <dir>/rejected/, kept for people.
  Status SetAside(const std::string& run_id, uint32_t attempt);
  const std::string& dir() const { return dir_; }

 private:
  std::string PathFor(const std::string& run_id, uint32_t attempt) const;
  std::string dir_;
};

}  // namespace servesweep::agent
