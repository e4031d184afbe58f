// Incremental Server-Sent Events splitter (WHATWG HTML "event stream interpretation").
//
// Feed() takes the response body in whatever pieces the network delivered (an event may be
// split at any byte, even inside a CRLF) and returns the events completed by that piece.
// Lines end with LF, CRLF or a lone CR; a blank line dispatches the event; lines starting with
// ':' are comments (servers send them as keep-alive pings); several `data:` lines of one event
// are joined with '\n'. Only `data` and `event` fields are kept (id/retry matter to browsers
// reconnecting, not to a benchmark).
//
// Not thread-safe: one parser per stream, used by one thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace servesweep::loadgen {

struct SseEvent {
  std::string event;   // the `event:` field; empty means "message"
  std::string data;    // `data:` lines joined with '\n'
};

class SseParser {
 public:
  // Appends the events completed by `bytes` to *out (it is not cleared).
  void Feed(std::string_view bytes, std::vector<SseEvent>* out);

  // At end of body: an event that ended without its blank line is still dispatched. The spec
  // says discard it, but some servers close right after the last `data:` line and vLLM's
  // client accepts such a tail too; dropping it would lose a [DONE] or the usage chunk.
  void Finish(std::vector<SseEvent>* out);

  void Reset();

 private:
  void ProcessLine(std::string_view line, std::vector<SseEvent>* out);
  void Dispatch(std::vector<SseEvent>* out);

  std::string line_;           // the current unterminated line
  bool skip_lf_ = false;       // the last byte was CR: a following LF belongs to it
  std::string data_;
  std::string event_;
  bool has_data_ = false;
};

}  // namespace servesweep::loadgen
