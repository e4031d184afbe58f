// The kernel's receive time of the bytes waiting on a TCP socket (SO_TIMESTAMPNS), on the
// steady clock. Both ends of a measurement stamp data by when it reached the host, not by when
// their own thread got round to reading it: on a busy or virtualised host the wake-up alone is
// tens of microseconds, and a thread reading 16 sockets in turn reaches the last one later still.
//
// Thread-safety: free functions on a caller-owned descriptor.
#pragma once

#include <cstdint>

namespace servesweep {

// Turns on receive timestamps for `fd`; false (errno set) where the socket refuses.
bool EnableReceiveTimestamps(int fd);

// The receive time (steady clock, ns) of the first segment queued on `fd`, read without consuming
// it (MSG_PEEK); -1 when nothing is queued, timestamps are off, or the socket is closed. TCP
// merges segments that queue up behind one another, and the merged segment carries the newest
// time: a stamp is never earlier than the bytes it covers.
int64_t PeekReceiveSteadyNs(int fd);

}  // namespace servesweep
