// What the load loop's epoll set watches for each socket libcurl names, with the system calls
// that change nothing left out. libcurl says "watch fd for IN", "for OUT", "stop" several times
// per request (on a reused keep-alive connection: watch IN when the request goes out, stop when
// its response ends, watch IN again for the next request): three epoll_ctl calls per request,
// about 5% of the loop's time at 20,000 requests/s.
//
// For the sockets of the loop's own connections (opened and closed through libcurl's socket
// callbacks, so their lifetime is known exactly) "stop" is lazy: the registration stays, and a
// later "watch" for the same events costs nothing. Should an unwatched socket report an event
// (the server closed an idle connection), Unwanted() says so and the registration is dropped
// then. Any other socket libcurl names (a resolver's pipe, closed by libcurl itself) is added
// and removed eagerly, as before, so a closed and reused descriptor number can never be taken
// for a registered one.
//
// Thread-safety: none; the load thread's alone.
#pragma once

#include <cstdint>
#include <vector>

namespace servesweep::loadgen {

class EpollWatch {
 public:
  explicit EpollWatch(int epoll_fd) : epoll_fd_(epoll_fd) {}

  // libcurl opened (Opened) or is about to close (Closing) one of its connection sockets.
  void Opened(int fd);
  void Closing(int fd);
  // Watch fd for `events` (EPOLLIN / EPOLLOUT bits), or for nothing (0: libcurl's remove).
  void Want(int fd, uint32_t events);
  // epoll reported fd: true when nothing is wanted of it (its registration is dropped now; do
  // not hand the event to libcurl).
  bool Unwanted(int fd);

  // epoll_ctl calls made so far (for tests and benchmarks).
  uint64_t epoll_ctl_calls() const { return ctl_calls_; }

 private:
  struct Socket {
    bool own = false;         // opened through the loop's callback, closed through it
    uint32_t registered = 0;  // the events epoll watches (0: not in the set)
    uint32_t wanted = 0;      // what libcurl asked for last
  };
  Socket& At(int fd);
  void Register(int fd, Socket& s, uint32_t events);

  int epoll_fd_;
  std::vector<Socket> sockets_;  // by descriptor
  uint64_t ctl_calls_ = 0;
};

}  // namespace servesweep::loadgen
