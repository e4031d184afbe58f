#include "agent/spool.h"

#include <capnp/serialize.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace servesweep::agent {
namespace {
constexpr const char* kSuffix = ".result";

// "spool full: " before errors that mean the disk is full, so people and tests see the cause.
std::string FullPrefix(int error_number) {
  return error_number == ENOSPC || error_number == EDQUOT ? "spool full: " : "";
}
}  // namespace

Status Spool::Init() {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error)
    return Status::Internal(
        fmt::format("{}: cannot create spool folder: {}", dir_, error.message()));
  return Status::Ok();
}

std::string Spool::PathFor(const std::string& run_id, uint32_t attempt) const {
  return fmt::format("{}/{}.{}{}", dir_, run_id, attempt, kSuffix);
}

Status Spool::Write(const std::string& run_id, uint32_t attempt, capnp::MessageBuilder& result) {
  const std::string path = PathFor(run_id, attempt);
  const std::string temp = path + ".tmp";
  auto words = capnp::messageToFlatArray(result);
  auto bytes = words.asBytes();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::Internal(
        fmt::format("{}{}: cannot create: {}", FullPrefix(errno), temp, std::strerror(errno)));
  }
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.begin() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error_number = n < 0 ? errno : ENOSPC;  // a 0-byte write means no room
      ::close(fd);
      ::unlink(temp.c_str());
      return Status::Internal(fmt::format("{}{}: write failed after {} of {} bytes: {}",
                                          FullPrefix(error_number), temp, written, bytes.size(),
                                          std::strerror(error_number)));
    }
    written += static_cast<size_t>(n);
  }
  // Close even when fsync fails: the descriptor must not leak on a full disk.
  const bool synced = ::fsync(fd) == 0;
  const int sync_errno = errno;
  const bool closed = ::close(fd) == 0;
  if (!synced || !closed) {
    const int error_number = synced ? errno : sync_errno;
    ::unlink(temp.c_str());
    return Status::Internal(fmt::format("{}{}: fsync/close failed: {}", FullPrefix(error_number),
                                        temp, std::strerror(error_number)));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temp.c_str());
    return Status::Internal(fmt::format("{}: rename failed: {}", path, why));
  }
  // The rename is durable only once the folder itself is synced.
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || ::fsync(dir_fd) != 0) {
    const std::string why = std::strerror(errno);
    if (dir_fd >= 0) ::close(dir_fd);
    return Status::Internal(fmt::format("{}: fsync of the spool folder failed: {}", dir_, why));
  }
  ::close(dir_fd);
  return Status::Ok();
}

std::vector<SpooledResult> Spool::List() const {
  std::vector<SpooledResult> out;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(kSuffix)) continue;
    const std::string stem = name.substr(0, name.size() - std::strlen(kSuffix));
    const size_t dot = stem.rfind('.');
    if (dot == std::string::npos) continue;
    SpooledResult result;
    result.run_id = stem.substr(0, dot);
    result.attempt = static_cast<uint32_t>(std::strtoul(stem.c_str() + dot + 1, nullptr, 10));
    result.path = entry.path().string();
    out.push_back(std::move(result));
  }
  return out;
}

Status Spool::Read(const SpooledResult& entry, std::string* bytes) const {
  std::ifstream in(entry.path, std::ios::binary);
  if (!in) return Status::Internal(fmt::format("{}: cannot read spooled result", entry.path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  *bytes = buffer.str();
  return Status::Ok();
}

void Spool::Remove(const std::string& run_id, uint32_t attempt) {
  ::unlink(PathFor(run_id, attempt).c_str());
}

Status Spool::SetAside(const std::string& run_id, uint32_t attempt) {
  const std::string rejected_dir = dir_ + "/rejected";
  std::error_code error;
  std::filesystem::create_directories(rejected_dir, error);
  const std::string from = PathFor(run_id, attempt);
  const std::string to = fmt::format("{}/{}.{}{}", rejected_dir, run_id, attempt, kSuffix);
  if (error || ::rename(from.c_str(), to.c_str()) != 0) {
    return Status::Internal(fmt::format("{}: cannot move to {}", from, rejected_dir));
  }
  return Status::Ok();
}

}  // namespace servesweep::agent
