#include "common/api_key.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

namespace servesweep {

Status ReadApiKey(const std::string& env_name, const std::string& what_env,
                  const std::string& file_path, const std::string& what_file, std::string* key) {
  key->clear();
  if (!env_name.empty()) {
    const char* value = std::getenv(env_name.c_str());
    if (value == nullptr || *value == '\0') {
      return Status::FailedPrecondition(
          fmt::format("environment variable {} ({}) is not set", env_name, what_env));
    }
    *key = value;
    return Status::Ok();
  }
  if (file_path.empty()) return Status::Ok();
  std::ifstream in(file_path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return Status::InvalidArgument(
        fmt::format("{} ({}): expected a readable file holding the key, found "
                    "none or an empty file",
                    file_path, what_file));
  }
  const size_t first = line.find_first_not_of(" \t\r\n");
  const size_t last = line.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return Status::InvalidArgument(
        fmt::format("{} ({}): expected the key on its first line, found a blank "
                    "line",
                    file_path, what_file));
  }
  *key = line.substr(first, last - first + 1);
  return Status::Ok();
}

}  // namespace servesweep
