// The kernel's receive time of the bytes a read takes from a socket. The emulator stamps a
// request's arrival with it rather than with the time its io thread got round to parsing the
// request: that thread may be busy with other connections or still waking up (20-100 us on a
// VM, and the 16th of 16 simultaneous requests would be stamped ~300 us late), and the arrival
// is the reference of the emulator's TTFT and of its timing core's schedule.
//
// Thread-safety: stateless; each call touches only its own socket.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>

namespace servesweep::sim {

// Asks the kernel to stamp the data it receives on fd (SO_TIMESTAMPNS). False if it refuses.
bool EnableReceiveTimestamps(int fd);

struct ReceivedBytes {
  ssize_t bytes = -1;  // recvmsg()'s result: > 0 read, 0 the peer closed, -1 failed (error)
  int error = 0;       // errno when bytes is -1 (EAGAIN: nothing was queued)
  // When the kernel received the bytes, on the steady clock (never later than now); nullopt if
  // fd has no receive timestamps or nothing was read.
  std::optional<std::chrono::steady_clock::time_point> received_at;
};

// Reads up to size queued bytes from fd without blocking, with their receive time.
//
// The stamp is the kernel's, in CLOCK_REALTIME, moved to the steady clock by the offset between
// the two clocks read now (a wall-clock step between receive and read would shift it). TCP
// stamps each queued segment when it arrives, moves the stamp forward when it merges a later
// segment into an unread one, and reports the stamp of the last segment a read takes: for bytes
// that arrived together (a request sent in one write over loopback or a LAN) that is their
// arrival; for bytes that trickled in, a time between the first and the last.
ReceivedBytes ReceiveWithTime(int fd, void* data, size_t size);

}  // namespace servesweep::sim
