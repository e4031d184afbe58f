#include "loadgen/sse_parser.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace servesweep::loadgen {
namespace {

// The first CR or LF in [p, end), or end. Sixteen bytes at a time: most bytes are JSON.
const char* FindLineEnd(const char* p, const char* end) {
#ifdef __SSE2__
  const __m128i cr = _mm_set1_epi8('\r');
  const __m128i lf = _mm_set1_epi8('\n');
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, lf)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    if (*p == '\r' || *p == '\n') return p;
  }
  return end;
}

class VectorSink final : public SseSink {
 public:
  explicit VectorSink(std::vector<SseEvent>* out) : out_(out) {}
  void OnEvent(std::string_view event, std::string_view data) override {
    out_->push_back(SseEvent{std::string(event), std::string(data)});
  }

 private:
  std::vector<SseEvent>* out_;
};

}  // namespace

void SseParser::Feed(std::string_view bytes, SseSink* sink) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  if (skip_lf_ && p < end) {
    skip_lf_ = false;
    if (*p == '\n') ++p;  // the LF of a CRLF split across two reads
  }
  while (p < end) {
    const char* line_end = FindLineEnd(p, end);
    if (line_end == end) {
      line_.append(p, static_cast<size_t>(end - p));
      break;
    }
    if (line_.empty()) {
      ProcessLine(std::string_view(p, static_cast<size_t>(line_end - p)), true, sink);
    } else {
      line_.append(p, static_cast<size_t>(line_end - p));
      ProcessLine(line_, false, sink);
      line_.clear();
    }
    p = line_end + 1;
    if (*line_end == '\r') {
      if (p < end) {
        if (*p == '\n') ++p;
      } else {
        skip_lf_ = true;
      }
    }
  }
  OwnData();
}

void SseParser::Finish(SseSink* sink) {
  if (!line_.empty()) {
    std::string line = std::move(line_);
    line_.clear();
    ProcessLine(line, false, sink);
  }
  Dispatch(sink);
  skip_lf_ = false;
}

void SseParser::Feed(std::string_view bytes, std::vector<SseEvent>* out) {
  VectorSink sink(out);
  Feed(bytes, &sink);
}

void SseParser::Finish(std::vector<SseEvent>* out) {
  VectorSink sink(out);
  Finish(&sink);
}

void SseParser::Reset() {
  line_.clear();
  skip_lf_ = false;
  data_.clear();
  data_view_ = {};
  data_is_view_ = false;
  event_.clear();
  has_data_ = false;
}

void SseParser::OwnData() {
  if (!data_is_view_) return;
  data_.assign(data_view_);
  data_view_ = {};
  data_is_view_ = false;
}

void SseParser::ProcessLine(std::string_view line, bool in_input, SseSink* sink) {
  if (line.empty()) {
    Dispatch(sink);
    return;
  }
  if (line[0] == ':') return;  // comment
  std::string_view field = line;
  std::string_view value;
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);  // one space only
  }
  if (field == "data") {
    if (!has_data_ && in_input) {
      data_view_ = value;  // handed on uncopied if the event ends in this input
      data_is_view_ = true;
    } else {
      OwnData();
      if (has_data_) data_.push_back('\n');
      data_.append(value);
    }
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  }
  // id, retry and unknown fields are ignored, as the spec says for unknown ones.
}

void SseParser::Dispatch(SseSink* sink) {
  // An event with no data line is not dispatched (spec), but its `event:` is still reset.
  if (has_data_) sink->OnEvent(event_, data_is_view_ ? data_view_ : std::string_view(data_));
  data_.clear();
  data_view_ = {};
  data_is_view_ = false;
  event_.clear();
  has_data_ = false;
}

}  // namespace servesweep::loadgen
