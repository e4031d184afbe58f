#include "common/receive_time.h"

#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cstring>

namespace servesweep {
namespace {

int64_t Ns(const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

}  // namespace

bool EnableReceiveTimestamps(int fd) {
  const int on = 1;
  return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) == 0;
}

int64_t PeekReceiveSteadyNs(int fd) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT) <= 0) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
    timespec received{};
    std::memcpy(&received, CMSG_DATA(c), sizeof received);
    // The stamp is on the realtime clock: carried over to the steady one by their offset now
    // (the two are read back to back; a step of the wall clock between them is the only error).
    timespec real_now{}, steady_now{};
    clock_gettime(CLOCK_REALTIME, &real_now);
    clock_gettime(CLOCK_MONOTONIC, &steady_now);
    const int64_t steady_ns = Ns(steady_now) - (Ns(real_now) - Ns(received));
    return std::min(steady_ns, Ns(steady_now));
  }
  return -1;
}

}  // namespace servesweep
