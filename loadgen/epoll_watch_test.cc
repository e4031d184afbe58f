// The watch against a real epoll set and real sockets: a lazily kept registration costs no call
// and still wakes the loop when the socket is wanted again; an unwanted socket that reports is
// dropped; a descriptor number that comes back for a new socket is registered afresh.
#include "loadgen/epoll_watch.h"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>

namespace servesweep::loadgen {
namespace {

class EpollWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(epoll_fd_, 0);
  }
  void TearDown() override { close(epoll_fd_); }
  // A connected pair: [0] is the watched end, [1] writes to it.
  std::array<int, 2> Pair() {
    std::array<int, 2> fds{-1, -1};
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()), 0);
    return fds;
  }
  // The descriptors epoll reports now (no wait).
  std::vector<int> Ready() {
    epoll_event events[8];
    const int n = epoll_wait(epoll_fd_, events, 8, 0);
    std::vector<int> fds;
    for (int i = 0; i < n; ++i) fds.push_back(events[i].data.fd);
    return fds;
  }
  int epoll_fd_ = -1;
};

TEST_F(EpollWatchTest, AnOwnSocketStopsAndStartsWithoutACallAndStillWakes) {
  EpollWatch watch(epoll_fd_);
  const auto [fd, peer] = Pair();
  watch.Opened(fd);
  watch.Want(fd, EPOLLIN);
  EXPECT_EQ(watch.epoll_ctl_calls(), 1u);
  watch.Want(fd, 0);        // the response ended
  watch.Want(fd, EPOLLIN);  // the next request on the same connection
  EXPECT_EQ(watch.epoll_ctl_calls(), 1u);
  ASSERT_EQ(write(peer, "x", 1), 1);
  EXPECT_EQ(Ready(), std::vector<int>{fd});
  EXPECT_FALSE(watch.Unwanted(fd));
  watch.Want(fd, EPOLLIN | EPOLLOUT);
  EXPECT_EQ(watch.epoll_ctl_calls(), 2u);  // a real change is made
  watch.Closing(fd);
  close(fd);
  close(peer);
}

TEST_F(EpollWatchTest, AnUnwantedSocketThatReportsIsDroppedFromTheSet) {
  EpollWatch watch(epoll_fd_);
  const auto [fd, peer] = Pair();
  watch.Opened(fd);
  watch.Want(fd, EPOLLIN);
  watch.Want(fd, 0);
  close(peer);  // the server closed the idle connection: readable (EOF)
  EXPECT_EQ(Ready(), std::vector<int>{fd});
  EXPECT_TRUE(watch.Unwanted(fd));
  EXPECT_TRUE(Ready().empty());  // level-triggered, yet no longer reported
  watch.Closing(fd);
  close(fd);
}

TEST_F(EpollWatchTest, ADescriptorNumberThatComesBackIsRegisteredAfresh) {
  EpollWatch watch(epoll_fd_);
  for (const bool own : {true, false}) {
    SCOPED_TRACE(own ? "own socket" : "another socket");
    const auto [fd, peer] = Pair();
    if (own) watch.Opened(fd);
    watch.Want(fd, EPOLLIN);
    watch.Want(fd, 0);
    if (own) watch.Closing(fd);
    close(fd);  // leaves the epoll set with it
    close(peer);
    const auto [again, again_peer] = Pair();
    ASSERT_EQ(again, fd);  // the lowest free numbers come back
    if (own) watch.Opened(again);
    watch.Want(again, EPOLLIN);
    ASSERT_EQ(write(again_peer, "x", 1), 1);
    EXPECT_EQ(Ready(), std::vector<int>{again});
    watch.Want(again, 0);
    if (own) watch.Closing(again);
    close(again);
    close(again_peer);
  }
}

}  // namespace
}  // namespace servesweep::loadgen
