#include "transport/socket_poll.h"

#include <fmt/format.h>

#include <cerrno>

namespace servesweep {

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
