#include "tests/support/network_namespace.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

Status Shell(const std::string& command) {
  std::string output;
  const int status = RunShell(command, &output);
  if (status == 0) return Status::Ok();
  return Status::Internal(fmt::format("`{}` failed ({}): {}", command,
                                      WIFEXITED(status) ? WEXITSTATUS(status) : -1, output));
}

// Namespaces of earlier test processes that died without their destructors (killed by a
// timeout, say): ss-<tag>-<pid> whose pid is gone. Deleting one also removes its veth pair.
void DeleteOrphans() {
  std::string names;
  if (RunShell("ip netns list", &names) != 0) return;
  size_t start = 0;
  while (start < names.size()) {
    size_t end = names.find('\n', start);
    if (end == std::string::npos) end = names.size();
    const std::string line = names.substr(start, end - start);
    start = end + 1;
    const std::string name = line.substr(0, line.find(' '));
    const size_t dash = name.rfind('-');
    if (!name.starts_with("ss-") || dash == std::string::npos) continue;
    const std::string pid = name.substr(dash + 1);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::filesystem::exists("/proc/" + pid)) continue;
    std::string ignored;
    RunShell(fmt::format("ip netns del {} 2>/dev/null", name), &ignored);
  }
}

}  // namespace

NetworkNamespace::~NetworkNamespace() { Destroy(); }

Status NetworkNamespace::Create(const std::string& tag) {
  const int pid = ::getpid();
  // Link names are at most 15 characters; the pid keeps parallel test processes apart.
  name_ = fmt::format("ss-{}-{}", tag, pid);
  host_link_ = fmt::format("ssh{}", pid % 10000000);
  node_link_ = fmt::format("ssn{}", pid % 10000000);
  const int subnet = 1 + pid % 250;
  host_address_ = fmt::format("10.213.{}.1", subnet);
  node_address_ = fmt::format("10.213.{}.2", subnet);
  DeleteOrphans();
  // A namespace left by a killed earlier run of this very pid would block the names.
  std::string ignored;
  RunShell(fmt::format("{{ ip netns del {}; ip link del {}; }} 2>/dev/null", name_, host_link_),
           &ignored);
  if (Status s = Shell("ip netns add " + name_); !s.ok()) return s;
  created_ = true;
  const std::vector<std::string> commands = {
      fmt::format("ip link add {} type veth peer name {}", host_link_, node_link_),
      fmt::format("ip link set {} netns {}", node_link_, name_),
      fmt::format("ip addr add {}/24 dev {}", host_address_, host_link_),
      fmt::format("ip link set {} up", host_link_),
      fmt::format("ip -n {} addr add {}/24 dev {}", name_, node_address_, node_link_),
      fmt::format("ip -n {} link set {} up", name_, node_link_),
      fmt::format("ip -n {} link set lo up", name_),
  };
  for (const auto& command : commands) {
    if (Status s = Shell(command); !s.ok()) {
      Destroy();
      return s;
    }
  }
  return Status::Ok();
}

Status NetworkNamespace::Cut() {
  return Shell(fmt::format("ip -n {} link set {} down", name_, node_link_));
}

Status NetworkNamespace::Restore() {
  return Shell(fmt::format("ip -n {} link set {} up", name_, node_link_));
}

void NetworkNamespace::Destroy() {
  if (!created_) return;
  created_ = false;
  // Deleting the namespace destroys its end of the pair, and with it the root end.
  std::string ignored;
  RunShell(fmt::format("{{ ip netns del {}; ip link del {}; }} 2>/dev/null", name_, host_link_),
           &ignored);
}

}  // namespace servesweep::testing
