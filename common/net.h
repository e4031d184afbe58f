// Small socket helpers shared by the agent (engine ports), the coordinator and the agent loops
// (polling one ZeroMQ socket), and the tests.
//
// Thread-safety: free functions; each call uses only its arguments.
#pragma once

#include <chrono>
#include <cstdint>
#include <zmq.hpp>

#include "common/status.h"

namespace servesweep {

// A loopback TCP port that was free a moment ago (the caller's child binds it next), 0 on error.
uint16_t FreeLoopbackPort();

// Waits up to `timeout` for `socket` to be readable. An interrupted wait reads as not readable.
Status PollReadable(zmq::socket_t& socket, std::chrono::milliseconds timeout, bool* readable);

}  // namespace servesweep
