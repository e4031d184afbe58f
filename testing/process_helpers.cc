#include "testing/process_helpers.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace servesweep::testing {

int ExitCode(ChildProcess& process, std::chrono::milliseconds timeout) {
  const auto status = process.Wait(timeout);
  if (!status) return -1;
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int RunShell(const std::string& command, std::string* output) {
  output->clear();
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  return ::pclose(pipe);
}

std::string ReadSourceFile(const std::string& path) {
  std::ifstream in(std::string(SERVESWEEP_SOURCE_DIR) + "/" + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace servesweep::testing
