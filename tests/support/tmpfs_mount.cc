#include "tests/support/tmpfs_mount.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace servesweep::testing {

TmpfsMount::~TmpfsMount() {
  if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
}

Status TmpfsMount::Mount(const std::string& path, size_t size_bytes) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) return Status::Internal(fmt::format("{}: cannot create: {}", path, error.message()));
  const std::string options = fmt::format("size={}", size_bytes);
  if (::mount("tmpfs", path.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    return Status::Internal(fmt::format("mount -t tmpfs -o {} tmpfs {} failed: {}", options, path,
                                        std::strerror(errno)));
  }
  path_ = path;
  mounted_ = true;
  return Status::Ok();
}

Status TmpfsMount::Fill(const std::string& name, size_t* written_bytes) {
  const std::string file = path_ + "/" + name;
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::Internal(fmt::format("{}: cannot create: {}", file, std::strerror(errno)));
  std::vector<char> block(4096, 'x');
  *written_bytes = 0;
  // Whole blocks first, then single bytes, so not even a small file fits afterwards.
  for (size_t chunk : {block.size(), size_t{1}}) {
    for (;;) {
      const ssize_t n = ::write(fd, block.data(), chunk);
      if (n > 0) {
        *written_bytes += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != ENOSPC) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        return Status::Internal(fmt::format("{}: write failed: {}", file, why));
      }
      break;
    }
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace servesweep::testing
