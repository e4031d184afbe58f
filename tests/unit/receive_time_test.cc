// The kernel's receive time read from a real TCP loopback pair.
#include "common/receive_time.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/clock.h"

namespace servesweep {
namespace {

struct LoopbackPair {
  int client = -1, server = -1;
  LoopbackPair() {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "cannot connect on loopback";
    }
    server = accept(listener, nullptr, nullptr);
    close(listener);
  }
  ~LoopbackPair() {
    close(client);
    close(server);
  }
};

TEST(ReceiveTime, IsWhenTheBytesArrivedNotWhenTheyAreRead) {
  LoopbackPair pair;
  ASSERT_TRUE(EnableReceiveTimestamps(pair.client));
  EXPECT_EQ(PeekReceiveSteadyNs(pair.client), -1);  // nothing queued yet
  const int64_t sent_ns = SteadyNowNs();
  ASSERT_EQ(send(pair.server, "hello", 5, 0), 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int64_t peeked_ns = PeekReceiveSteadyNs(pair.client);
  EXPECT_GE(peeked_ns, sent_ns);
  EXPECT_LT(peeked_ns - sent_ns, 5'000'000) << "the stamp is the read's time, not the arrival's";
  char buf[8] = {};
  EXPECT_EQ(recv(pair.client, buf, sizeof buf, 0), 5) << "the peek consumed nothing";
  EXPECT_EQ(std::string(buf, 5), "hello");
}

TEST(ReceiveTime, UnknownWithoutTimestampsOrOnAClosedSocket) {
  LoopbackPair pair;
  ASSERT_EQ(send(pair.server, "x", 1, 0), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(PeekReceiveSteadyNs(pair.client), -1);  // timestamps never enabled
  EXPECT_EQ(PeekReceiveSteadyNs(-1), -1);
}

}  // namespace
}  // namespace servesweep
