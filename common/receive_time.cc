#include "common/receive_time.h"

#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cstring>

namespace servesweep {
namespace {

using Clock = std::chrono::steady_clock;

int64_t TimespecNs(const timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + static_cast<int64_t>(t.tv_nsec);
}

// The kernel's CLOCK_REALTIME stamp in msg's control data, on the steady clock.
std::optional<Clock::time_point> SteadyStamp(msghdr& msg) {
  std::optional<int64_t> received_realtime_ns;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec stamp;
      std::memcpy(&stamp, CMSG_DATA(c), sizeof(stamp));
      received_realtime_ns = TimespecNs(stamp);
    }
  }
  if (!received_realtime_ns || *received_realtime_ns == 0) return std::nullopt;

  // Both clocks read back to back: the stamp's age on the wall clock is its age on the steady one.
  timespec realtime_now, steady_now;
  clock_gettime(CLOCK_REALTIME, &realtime_now);
  clock_gettime(CLOCK_MONOTONIC, &steady_now);
  const int64_t age_ns = TimespecNs(realtime_now) - *received_realtime_ns;
  const int64_t steady_now_ns = TimespecNs(steady_now);
  // A stamp "in the future" (clock skew, a wall-clock step) is taken as now.
  const int64_t received_ns = age_ns > 0 ? steady_now_ns - age_ns : steady_now_ns;
  return Clock::time_point(std::chrono::nanoseconds(received_ns));
}

}  // namespace

bool EnableReceiveTimestamps(int fd) {
  const int on = 1;
  return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) == 0;
}

namespace {

// recvmsg with room for the receive stamp; `flags` beside MSG_DONTWAIT (MSG_PEEK: look only).
ReceivedBytes Receive(int fd, void* data, size_t size, int flags) {
  iovec iov{.iov_base = data, .iov_len = size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ReceivedBytes received;
  received.bytes = recvmsg(fd, &msg, flags | MSG_DONTWAIT);
  if (received.bytes < 0) received.error = errno;
  if (received.bytes > 0) received.received_at = SteadyStamp(msg);
  return received;
}

}  // namespace

ReceivedBytes ReceiveWithTime(int fd, void* data, size_t size) {
  return Receive(fd, data, size, 0);
}

int64_t PeekReceiveSteadyNs(int fd) {
  char byte = 0;
  const ReceivedBytes peeked = Receive(fd, &byte, 1, MSG_PEEK);
  if (!peeked.received_at) return -1;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             peeked.received_at->time_since_epoch())
      .count();
}

}  // namespace servesweep
