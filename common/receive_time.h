// The kernel's receive time of the bytes waiting on or read from a TCP socket (SO_TIMESTAMPNS),
// on the steady clock. Both ends of a measurement stamp data by when it reached the host, not by
// when their own thread got round to it: that thread may be busy with other connections or
// still waking up (20-100 us on a VM; the 16th of 16 simultaneous requests would be stamped
// ~300 us late). The emulator stamps a request's arrival with it (the reference of its TTFT and
// of its timing core's schedule); the load generator stamps each read of a response.
//
// Thread-safety: stateless; each call touches only its own socket.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace servesweep {

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

// The receive time (steady clock, ns) of the bytes queued on `fd`, read without consuming them
// (MSG_PEEK, one byte: the first queued segment, merged segments carrying the newest time); -1
// when nothing is queued, timestamps are off, or the socket is closed. For a reader that cannot
// do the read itself (libcurl reads the load generator's sockets).
int64_t PeekReceiveSteadyNs(int fd);

}  // namespace servesweep
