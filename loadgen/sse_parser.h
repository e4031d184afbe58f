// Incremental Server-Sent Events splitter (WHATWG HTML "event stream interpretation").
//
// Feed() takes the response body in whatever pieces the network delivered (an event may be
// split at any byte, even inside a CRLF) and returns the events completed by that piece.
// Lines end with LF, CRLF or a lone CR; a blank line dispatches the event; lines starting with
// ':' are comments (servers send them as keep-alive pings); several `data:` lines of one event
// are joined with '\n'. Only `data` and `event` fields are kept (id/retry matter to browsers
// reconnecting, not to a benchmark).
//
// Events go to an SseSink without copies when the event lies whole in the bytes just fed (the
// common case: one read holds many events); only an event split across reads, or one with
// several data lines, is assembled in the parser's own buffer (kept for reuse). The
// std::vector overloads copy each event out, for tests and tools.
//
// Not thread-safe: one parser per stream, used by one thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace servesweep::loadgen {

struct SseEvent {
  std::string event;  // the `event:` field; empty means "message"
  std::string data;   // `data:` lines joined with '\n'
};

// Receives each completed event. The views are valid only during the call.
class SseSink {
 public:
  virtual void OnEvent(std::string_view event, std::string_view data) = 0;

 protected:
  ~SseSink() = default;
};

class SseParser {
 public:
  // Hands the events completed by `bytes` to the sink, in order.
  void Feed(std::string_view bytes, SseSink* sink);

  // At end of body: an event that ended without its blank line is still dispatched. The spec
  // says discard it, but some servers close right after the last `data:` line and vLLM's
  // client accepts such a tail too; dropping it would lose a [DONE] or the usage chunk.
  void Finish(SseSink* sink);

  // Copying forms: append the events to *out (it is not cleared).
  void Feed(std::string_view bytes, std::vector<SseEvent>* out);
  void Finish(std::vector<SseEvent>* out);

  void Reset();

 private:
  // `in_input`: the line lies in the bytes of the current Feed call (so its data may be handed
  // on as a view), not in line_.
  void ProcessLine(std::string_view line, bool in_input, SseSink* sink);
  void Dispatch(SseSink* sink);
  // Before the bytes of a Feed call go away: copy a pending data view into data_.
  void OwnData();

  std::string line_;      // the current unterminated line
  bool skip_lf_ = false;  // the last byte was CR: a following LF belongs to it
  std::string data_;
  std::string_view data_view_;  // the event's only data line, in the current input
  bool data_is_view_ = false;
  std::string event_;
  bool has_data_ = false;
};

}  // namespace servesweep::loadgen
