#include "agent/loadgen/sse_parser.h"

namespace servesweep::loadgen {

void SseParser::Feed(std::string_view bytes, std::vector<SseEvent>* out) {
  size_t i = 0;
  if (skip_lf_ && !bytes.empty()) {
    skip_lf_ = false;
    if (bytes[0] == '\n') i = 1;   // the LF of a CRLF split across two reads
  }
  while (i < bytes.size()) {
    // Scan for the next line end in bulk: most bytes are JSON, not line ends.
    size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(i));
      return;
    }
    if (line_.empty()) {
      ProcessLine(bytes.substr(i, end - i), out);
    } else {
      line_.append(bytes.substr(i, end - i));
      ProcessLine(line_, out);
      line_.clear();
    }
    if (bytes[end] == '\r') {
      if (end + 1 < bytes.size()) {
        i = end + 1 + (bytes[end + 1] == '\n' ? 1 : 0);
      } else {
        skip_lf_ = true;
        i = end + 1;
      }
    } else {
      i = end + 1;
    }
  }
}

void SseParser::Finish(std::vector<SseEvent>* out) {
  if (!line_.empty()) {
    std::string line = std::move(line_);
    line_.clear();
    ProcessLine(line, out);
  }
  Dispatch(out);
  skip_lf_ = false;
}

void SseParser::Reset() {
  line_.clear();
  skip_lf_ = false;
  data_.clear();
  event_.clear();
  has_data_ = false;
}

void SseParser::ProcessLine(std::string_view line, std::vector<SseEvent>* out) {
  if (line.empty()) {
    Dispatch(out);
    return;
  }
  if (line[0] == ':') return;   // comment
  std::string_view field = line;
  std::string_view value;
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);   // one space only
  }
  if (field == "data") {
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  }
  // id, retry and unknown fields are ignored, as the spec says for unknown ones.
}

void SseParser::Dispatch(std::vector<SseEvent>* out) {
  // An event with no data line is not dispatched (spec), but its `event:` is still reset.
  if (has_data_) out->push_back(SseEvent{std::move(event_), std::move(data_)});
  data_.clear();
  event_.clear();
  has_data_ = false;
}

}  // namespace servesweep::loadgen
