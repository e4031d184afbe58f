// The kernel's receive time of a socket's first unread byte. The emulator stamps a request's
// arrival with it rather than with the time its io thread got round to parsing the request:
// that thread may be busy with other connections or still waking up (20-100 us on a VM, and
// the 16th of 16 simultaneous requests would be stamped ~300 us late), and the arrival is the
// reference of the emulator's TTFT and of its timing core's schedule.
//
// Thread-safety: stateless; each call touches only its own socket.
#pragma once

#include <chrono>
#include <optional>

namespace servesweep::sim {

// Asks the kernel to stamp the data it receives on fd (SO_TIMESTAMPNS). False if it refuses.
bool EnableReceiveTimestamps(int fd);

// When the kernel received the oldest unread byte on fd, on the steady clock (never later than
// now). Reads nothing (MSG_PEEK, non-blocking): the byte stays queued. nullopt when no byte is
// queued, the peer has closed, fd has no receive timestamps, or on any error.
//
// The kernel stamps with CLOCK_REALTIME; the stamp is moved to the steady clock by the offset
// between the two clocks read now, so a wall-clock step between receive and peek would shift it.
// If TCP merges later segments into the unread one, the stamp is that of the latest merged.
std::optional<std::chrono::steady_clock::time_point> PeekReceiveTime(int fd);

}  // namespace servesweep::sim
