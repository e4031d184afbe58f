// A free loopback port, for the agent's engine ports and the tests.
//
// Thread-safety: free functions; each call uses only its arguments.
#pragma once

#include <cstdint>

namespace servesweep {

// A loopback TCP port that was free a moment ago (the caller's child binds it next), 0 on error.
uint16_t FreeLoopbackPort();

}  // namespace servesweep
