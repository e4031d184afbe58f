// A scratch folder for one test: made fresh under the system's temp folder (its name holds the
// test's name, the pid and a random part), removed when the object goes, unless Keep() was
// called or SERVESWEEP_KEEP_TEST_DIRS is set (to read a failed test's files).
//
// Thread-safety: one object per test; not shared between threads.
#pragma once

#include <string>

namespace servesweep::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& dir() const { return dir_; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // Writes `text` to dir/name; returns the path.
  std::string WriteFile(const std::string& name, const std::string& text) const;
  void Keep() { keep_ = true; }

 private:
  std::string dir_;
  bool keep_ = false;
};

}  // namespace servesweep::testing
