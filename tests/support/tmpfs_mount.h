// A small tmpfs mounted on a test's folder, to give a process a disk that is full. The
// destructor unmounts it (lazily, so a process still holding a file there cannot keep it).
//
// Needs CAP_SYS_ADMIN (root): Mount() says why not otherwise, and tests skip.
//
// Thread-safety: one per test, used from the test's thread.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace servesweep::testing {

class TmpfsMount {
 public:
  TmpfsMount() = default;
  ~TmpfsMount();
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  Status Mount(const std::string& path, size_t size_bytes);
  // Writes `name` until the filesystem refuses more (ENOSPC); returns the bytes written.
  Status Fill(const std::string& name, size_t* written_bytes);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

}  // namespace servesweep::testing
