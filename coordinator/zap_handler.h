// The coordinator's ZAP handler (ZeroMQ Authentication Protocol, RFC 27): a thread that answers
// libzmq's authentication requests on inproc://zeromq.zap.01 for every CURVE handshake on the
// context, admitting only clients whose public key is on the allow-list. A refused client never
// completes its handshake, so nothing it sends reaches the coordinator's socket.
//
// Thread-safety: Start() and Stop() from the owning thread; counters may be read from any thread.
// Stop() (or the destructor) must run before the zmq context is closed.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/status.h"

namespace servesweep::coordinator {

class ZapHandler {
 public:
  ZapHandler(zmq::context_t& context, const std::vector<std::string>& allowed_public_z85);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Binds inproc://zeromq.zap.01 (before any CURVE socket binds) and starts answering.
  Status Start();
  void Stop();

  uint64_t admitted() const { return admitted_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  void Serve();

  zmq::context_t& context_;
  std::set<std::array<uint8_t, 32>> allowed_;
  zmq::socket_t socket_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> admitted_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace servesweep::coordinator
