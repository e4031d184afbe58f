// Waiting on one ZeroMQ socket, as the coordinator's and the agent's loops do.
//
// Thread-safety: free functions; each call uses only its arguments (a socket belongs to one
// thread).
#pragma once

#include <chrono>
#include <zmq.hpp>

#include "common/status.h"

namespace servesweep {

// Waits up to `timeout` for `socket` to be readable. An interrupted wait reads as not readable.
Status PollReadable(zmq::socket_t& socket, std::chrono::milliseconds timeout, bool* readable);

}  // namespace servesweep
