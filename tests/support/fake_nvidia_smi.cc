#include "tests/support/fake_nvidia_smi.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace servesweep::testing {

PathWithFakeNvidiaSmi::PathWithFakeNvidiaSmi(const Harness& h, bool install) {
  const std::string bin = h.Path("bin");
  std::filesystem::create_directories(bin);
  if (install) {
    std::filesystem::copy_file(std::string(SERVESWEEP_SOURCE_DIR) + "/tests/data/fake-nvidia-smi",
                               bin + "/nvidia-smi",
                               std::filesystem::copy_options::overwrite_existing);
  } else {
    std::filesystem::remove(bin + "/nvidia-smi");  // one an earlier use in this test put there
  }
  old_ = std::getenv("PATH") ? std::getenv("PATH") : "";
  std::string path = bin;
  std::stringstream dirs(old_);
  for (std::string d; std::getline(dirs, d, ':');) {
    if (install || !std::filesystem::exists(d + "/nvidia-smi")) path += ":" + d;
  }
  ::setenv("PATH", path.c_str(), 1);
}

PathWithFakeNvidiaSmi::~PathWithFakeNvidiaSmi() { ::setenv("PATH", old_.c_str(), 1); }

}  // namespace servesweep::testing
