// The kernel's receive time over a real TCP loopback connection: the stamp is when the bytes
// arrived, not when they were read.
#include "common/receive_time.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>

namespace servesweep {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A connected loopback pair: client writes, server is the accepted end.
struct LoopbackPair {
  LoopbackPair() {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot listen on 127.0.0.1");
    }
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(client, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
      throw std::runtime_error("cannot connect to 127.0.0.1");
    }
    server = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    if (server < 0) throw std::runtime_error("accept failed");
  }
  ~LoopbackPair() {
    ::close(client);
    ::close(server);
  }
  void Send(const std::string& bytes) const {
    ASSERT_EQ(::send(client, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }

  int client = -1;
  int server = -1;
};

// The kernel turns receive stamping on shortly after the first socket asks (deferred work):
// waits until a probe byte comes back stamped.
void WaitUntilTheKernelStamps(const LoopbackPair& pair) {
  char buf[8];
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    pair.Send("p");
    std::this_thread::sleep_for(milliseconds(1));
    const ReceivedBytes probe = ReceiveWithTime(pair.server, buf, sizeof(buf));
    ASSERT_EQ(probe.bytes, 1);
    if (probe.received_at) return;
    ASSERT_LT(Clock::now(), give_up) << "the kernel never stamped received bytes";
  }
}

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

TEST(ReceiveWithTime, IsWhenTheBytesArrivedNotWhenTheyAreRead) {
  LoopbackPair pair;
  ASSERT_TRUE(EnableReceiveTimestamps(pair.server));
  ASSERT_NO_FATAL_FAILURE(WaitUntilTheKernelStamps(pair));
  char buf[64];
  const ReceivedBytes nothing = ReceiveWithTime(pair.server, buf, sizeof(buf));
  EXPECT_EQ(nothing.bytes, -1);
  EXPECT_TRUE(nothing.error == EAGAIN || nothing.error == EWOULDBLOCK) << nothing.error;
  EXPECT_FALSE(nothing.received_at.has_value());

  const Clock::time_point sent = Clock::now();
  pair.Send("hello");
  std::this_thread::sleep_for(milliseconds(30));
  const Clock::time_point read = Clock::now();
  const ReceivedBytes hello = ReceiveWithTime(pair.server, buf, sizeof(buf));
  ASSERT_EQ(hello.bytes, 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  ASSERT_TRUE(hello.received_at.has_value());
  EXPECT_LT(std::abs(MsBetween(sent, *hello.received_at)), 5) << "the send time, not 30 ms on";
  EXPECT_GE(MsBetween(*hello.received_at, read), 25);
  EXPECT_LE(*hello.received_at, Clock::now());

  // Bytes that trickled in and are read together carry the stamp of the last (see the header).
  pair.Send("ab");
  std::this_thread::sleep_for(milliseconds(30));
  const Clock::time_point second_sent = Clock::now();
  pair.Send("cd");
  std::this_thread::sleep_for(milliseconds(1));
  const ReceivedBytes both = ReceiveWithTime(pair.server, buf, sizeof(buf));
  ASSERT_EQ(both.bytes, 4);
  EXPECT_EQ(std::string(buf, 4), "abcd");
  ASSERT_TRUE(both.received_at.has_value());
  EXPECT_LT(std::abs(MsBetween(second_sent, *both.received_at)), 5);
}

TEST(ReceiveWithTime, IsUnknownWithoutTimestampsOrWhenNothingIsRead) {
  LoopbackPair stamped;  // keeps the kernel's stamping on, so only the socket option differs
  ASSERT_TRUE(EnableReceiveTimestamps(stamped.server));
  char buf[8];
  LoopbackPair plain;
  plain.Send("x");
  std::this_thread::sleep_for(milliseconds(1));
  const ReceivedBytes unstamped = ReceiveWithTime(plain.server, buf, sizeof(buf));
  EXPECT_EQ(unstamped.bytes, 1);
  EXPECT_FALSE(unstamped.received_at.has_value());

  ::shutdown(stamped.client, SHUT_WR);
  std::this_thread::sleep_for(milliseconds(1));
  const ReceivedBytes closed = ReceiveWithTime(stamped.server, buf, sizeof(buf));
  EXPECT_EQ(closed.bytes, 0) << "the peer closed";
  EXPECT_FALSE(closed.received_at.has_value());
  const ReceivedBytes bad = ReceiveWithTime(-1, buf, sizeof(buf));
  EXPECT_EQ(bad.bytes, -1);
  EXPECT_EQ(bad.error, EBADF);
}

TEST(PeekReceiveSteadyNs, IsTheArrivalAndConsumesNothing) {
  LoopbackPair pair;
  ASSERT_TRUE(EnableReceiveTimestamps(pair.server));
  ASSERT_NO_FATAL_FAILURE(WaitUntilTheKernelStamps(pair));
  EXPECT_EQ(PeekReceiveSteadyNs(pair.server), -1);  // nothing queued
  const Clock::time_point sent = Clock::now();
  pair.Send("hello");
  std::this_thread::sleep_for(milliseconds(30));
  const int64_t peeked_ns = PeekReceiveSteadyNs(pair.server);
  ASSERT_GE(peeked_ns, 0);
  const Clock::time_point peeked{std::chrono::nanoseconds(peeked_ns)};
  EXPECT_LT(std::abs(MsBetween(sent, peeked)), 5) << "the send time, not 30 ms on";
  char buf[8] = {};
  EXPECT_EQ(::recv(pair.server, buf, sizeof buf, 0), 5) << "the peek consumed nothing";
  EXPECT_EQ(std::string(buf, 5), "hello");
  LoopbackPair plain;  // no timestamps asked for
  plain.Send("x");
  std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(PeekReceiveSteadyNs(plain.server), -1);
  EXPECT_EQ(PeekReceiveSteadyNs(-1), -1);
}

}  // namespace
}  // namespace servesweep
