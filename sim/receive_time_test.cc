// PeekReceiveTime over a real TCP loopback connection: the stamp is when the bytes arrived,
// not when they were looked at, and looking consumes nothing.
#include "sim/receive_time.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace servesweep::sim {
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
  void Send(char byte) const { ASSERT_EQ(::send(client, &byte, 1, 0), 1); }
  char Receive() const {
    char byte = 0;
    EXPECT_EQ(::recv(server, &byte, 1, 0), 1);
    return byte;
  }

  int client = -1;
  int server = -1;
};

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

TEST(PeekReceiveTime, IsWhenTheBytesArrivedAndLeavesThemQueued) {
  LoopbackPair pair;
  ASSERT_TRUE(EnableReceiveTimestamps(pair.server));
  // The kernel turns receive stamping on shortly after the first socket asks (deferred work):
  // wait until a probe byte comes back stamped.
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    pair.Send('p');
    std::this_thread::sleep_for(milliseconds(1));
    const bool stamped = PeekReceiveTime(pair.server).has_value();
    EXPECT_EQ(pair.Receive(), 'p');
    if (stamped) break;
    ASSERT_LT(Clock::now(), give_up) << "the kernel never stamped received bytes";
  }
  EXPECT_FALSE(PeekReceiveTime(pair.server).has_value()) << "nothing is queued";

  const Clock::time_point sent = Clock::now();
  pair.Send('x');
  std::this_thread::sleep_for(milliseconds(30));
  const Clock::time_point peeked = Clock::now();
  const std::optional<Clock::time_point> received = PeekReceiveTime(pair.server);
  ASSERT_TRUE(received.has_value());
  EXPECT_LT(std::abs(MsBetween(sent, *received)), 5) << "the stamp is the send time, not 30 ms on";
  EXPECT_LE(*received, Clock::now());
  EXPECT_GE(MsBetween(*received, peeked), 25);
  // Peeking again gives the same stamp; the byte is still there to read.
  const std::optional<Clock::time_point> again = PeekReceiveTime(pair.server);
  ASSERT_TRUE(again.has_value());
  EXPECT_LT(std::abs(MsBetween(*received, *again)), 1);
  EXPECT_EQ(pair.Receive(), 'x');
}

TEST(PeekReceiveTime, IsUnknownWithoutTimestampsOrAfterTheClose) {
  LoopbackPair stamped;  // keeps the kernel's stamping on, so only the socket option differs
  ASSERT_TRUE(EnableReceiveTimestamps(stamped.server));
  LoopbackPair plain;
  plain.Send('x');
  std::this_thread::sleep_for(milliseconds(1));
  EXPECT_FALSE(PeekReceiveTime(plain.server).has_value());
  EXPECT_EQ(plain.Receive(), 'x');

  ::shutdown(stamped.client, SHUT_WR);
  std::this_thread::sleep_for(milliseconds(1));
  EXPECT_FALSE(PeekReceiveTime(stamped.server).has_value()) << "the peer closed: no byte";
  EXPECT_FALSE(PeekReceiveTime(-1).has_value());
}

}  // namespace
}  // namespace servesweep::sim
