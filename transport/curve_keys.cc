#include "transport/curve_keys.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace servesweep {
namespace {

std::string Trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const auto end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// Lines of a key file without comments and blanks, with their 1-based line numbers.
Status ReadKeyLines(const std::string& path, std::vector<std::pair<int, std::string>>* lines) {
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound(fmt::format("{}: cannot read the key file: {}", path, strerror(errno)));
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    line = Trim(line);
    // '#' is a Z85 character: a line is a comment only when it is not a key.
    if (line.empty() || (line[0] == '#' && !IsCurveKeyZ85(line))) continue;
    lines->emplace_back(number, line);
  }
  return Status::Ok();
}

Status WriteFileMode(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    return Status::Internal(
        fmt::format("{}: cannot create the key file: {}{}", path, strerror(errno),
                    errno == EEXIST ? " (an existing key is never overwritten)" : ""));
  }
  ::fchmod(fd, mode);  // whatever the umask
  const ssize_t written = ::write(fd, text.data(), text.size());
  const bool ok = written == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return Status::Internal(fmt::format("{}: cannot write the key file", path));
  return Status::Ok();
}

}  // namespace

bool IsCurveKeyZ85(const std::string& text) {
  if (text.size() != 40) return false;
  uint8_t binary[32];
  return zmq_z85_decode(binary, text.c_str()) != nullptr;
}

Status GenerateCurveKeypair(CurveKeypair* out) {
  char public_z85[41] = {};
  char secret_z85[41] = {};
  if (zmq_curve_keypair(public_z85, secret_z85) != 0) {
    return Status::Internal(
        fmt::format("cannot generate a CurveZMQ keypair: {} (expected libzmq built with CURVE)",
                    zmq_strerror(zmq_errno())));
  }
  out->public_z85 = public_z85;
  out->secret_z85 = secret_z85;
  return Status::Ok();
}

Status WriteCurveKeypair(const std::string& dir, const std::string& name,
                         const CurveKeypair& keypair) {
  std::error_code error;
  if (!std::filesystem::exists(dir)) {
    std::filesystem::create_directories(dir, error);
    if (error) {
      return Status::Internal(
          fmt::format("{}: cannot create the folder: {}", dir, error.message()));
    }
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, error);
  }
  const std::string stem = dir + "/" + name;
  if (Status s = WriteFileMode(
          stem + ".secret",
          "# servesweep CurveZMQ secret key: keep private\n" + keypair.secret_z85 + "\n", 0600);
      !s.ok()) {
    return s;
  }
  return WriteFileMode(stem + ".pub", keypair.public_z85 + "\n", 0644);
}

Status ReadCurveSecretKey(const std::string& path, CurveKeypair* out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound(
        fmt::format("{}: cannot read the secret key: {}", path, strerror(errno)));
  }
  if ((st.st_mode & 077) != 0) {
    return Status::FailedPrecondition(fmt::format(
        "{}: secret key readable by others (mode {:o}); expected mode 0600 (chmod 600 {})", path,
        st.st_mode & 0777, path));
  }
  std::vector<std::pair<int, std::string>> lines;
  if (Status s = ReadKeyLines(path, &lines); !s.ok()) return s;
  if (lines.size() != 1 || !IsCurveKeyZ85(lines[0].second)) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected one 40-character Z85 secret key (servesweep keygen), found {} key line(s)",
        path, lines.size()));
  }
  char public_z85[41] = {};
  if (zmq_curve_public(public_z85, lines[0].second.c_str()) != 0) {
    return Status::Internal(
        fmt::format("{}: cannot derive the public key: {}", path, zmq_strerror(zmq_errno())));
  }
  out->secret_z85 = lines[0].second;
  out->public_z85 = public_z85;
  return Status::Ok();
}

Status ReadCurvePublicKey(const std::string& path, std::string* public_z85) {
  std::vector<std::pair<int, std::string>> lines;
  if (Status s = ReadKeyLines(path, &lines); !s.ok()) return s;
  if (lines.size() != 1 || !IsCurveKeyZ85(lines[0].second)) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected one 40-character Z85 public key (servesweep keygen), found {} key line(s)",
        path, lines.size()));
  }
  *public_z85 = lines[0].second;
  return Status::Ok();
}

Status ReadCurveAllowList(const std::string& path, std::vector<std::string>* public_z85) {
  std::vector<std::pair<int, std::string>> lines;
  if (Status s = ReadKeyLines(path, &lines); !s.ok()) return s;
  for (const auto& [number, key] : lines) {
    if (!IsCurveKeyZ85(key)) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: expected a 40-character Z85 public key, found '{}' ({} characters)",
                      path, number, key.size() > 48 ? key.substr(0, 48) + "..." : key, key.size()));
    }
    public_z85->push_back(key);
  }
  if (public_z85->empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: expected at least one agent public key, found none", path));
  }
  return Status::Ok();
}

}  // namespace servesweep
