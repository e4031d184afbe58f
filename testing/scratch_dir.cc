#include "testing/scratch_dir.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/ids.h"

namespace servesweep::testing {

ScratchDir::ScratchDir(const std::string& name) {
  dir_ = (std::filesystem::temp_directory_path() /
          fmt::format("servesweep-test-{}-{}-{}", name, ::getpid(), RandomHex(6)))
             .string();
  std::filesystem::create_directories(dir_);
}

ScratchDir::~ScratchDir() {
  if (keep_ || std::getenv("SERVESWEEP_KEEP_TEST_DIRS") != nullptr) return;
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string ScratchDir::WriteFile(const std::string& name, const std::string& text) const {
  const std::string path = Path(name);
  std::ofstream(path) << text;
  return path;
}

}  // namespace servesweep::testing
