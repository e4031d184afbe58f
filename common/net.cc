#include "common/net.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace servesweep {

uint16_t FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

Status PollReadable(zmq::socket_t& socket, std::chrono::milliseconds timeout, bool* readable) {
  zmq::pollitem_t items[] = {{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0}};
  *readable = false;
  try {
    zmq::poll(items, 1, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) return Status::Internal(fmt::format("poll failed: {}", e.what()));
    return Status::Ok();
  }
  *readable = (items[0].revents & ZMQ_POLLIN) != 0;
  return Status::Ok();
}

}  // namespace servesweep
