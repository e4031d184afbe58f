#include "loadgen/epoll_watch.h"

#include <sys/epoll.h>

#include <cerrno>

namespace servesweep::loadgen {

EpollWatch::Socket& EpollWatch::At(int fd) {
  if (static_cast<size_t>(fd) >= sockets_.size()) sockets_.resize(static_cast<size_t>(fd) + 1);
  return sockets_[static_cast<size_t>(fd)];
}

void EpollWatch::Opened(int fd) { At(fd) = Socket{.own = true}; }

void EpollWatch::Closing(int fd) {
  // Closing the descriptor takes it out of the epoll set; the number may come back for a new
  // socket, which starts unregistered.
  At(fd) = Socket{};
}

void EpollWatch::Register(int fd, Socket& s, uint32_t events) {
  if (s.registered == events) return;
  ++ctl_calls_;
  if (events == 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);  // fails harmlessly once closed
  } else {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    const int op = s.registered == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (epoll_ctl(epoll_fd_, op, fd, &ev) != 0) {
      // ENOENT: a socket we did not see close (not our own) came back under the same number;
      // EEXIST: the other way round.
      ++ctl_calls_;
      epoll_ctl(epoll_fd_, errno == ENOENT ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
    }
  }
  s.registered = events;
}

void EpollWatch::Want(int fd, uint32_t events) {
  Socket& s = At(fd);
  s.wanted = events;
  if (events == 0 && s.own) return;  // lazy: kept until it reports an event or closes
  Register(fd, s, events);
}

bool EpollWatch::Unwanted(int fd) {
  Socket& s = At(fd);
  if (s.wanted != 0) return false;
  Register(fd, s, 0);
  return true;
}

}  // namespace servesweep::loadgen
