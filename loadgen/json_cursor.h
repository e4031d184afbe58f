// A validating, allocation-free JSON cursor for the stream decoder's hot path: it walks one
// document in place and accepts exactly what nlohmann::json::parse accepts (RFC 8259: strict
// numbers, escapes, surrogate pairs, UTF-8 in strings, a leading BOM, no comments; a number that
// overflows a double is an error, as nlohmann reports "number overflow"). Callers read the few
// fields they need and Skip() the rest; every skipped value is still validated, so garbage is
// rejected the same way a full parse would reject it.
//
// Strings are returned raw (the bytes between the quotes, escapes left in); Unescape() decodes
// one when a caller needs its value. Not thread-safe; one cursor per document.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace servesweep::loadgen {

struct JsonString {
  std::string_view raw;  // between the quotes, escapes not decoded
  bool escaped = false;  // raw holds at least one backslash escape
};

class JsonCursor {
 public:
  // `stack` is scratch for Skip() of nested values; passing one kept across documents makes
  // the cursor allocation-free after the first deep document.
  JsonCursor(std::string_view doc, std::vector<char>* stack);

  // Skips a BOM (EF BB BF) at the very start, as nlohmann does; false on a partial BOM.
  bool SkipBom();
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  // The next non-space byte, or '\0' at the end (the caller then fails on it).
  char Peek() {
    SkipSpace();
    return p_ < end_ ? *p_ : '\0';
  }
  // After the document: nothing but space follows, or a NUL byte (nlohmann's lexer takes NUL
  // for the end of input and ignores what comes after it).
  bool AtEnd() {
    SkipSpace();
    return p_ == end_ || *p_ == '\0';
  }
  // Consumes `c` after optional space; false when the next byte is something else.
  bool Consume(char c) {
    SkipSpace();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }

  // At '"'. Inline for the common case, a short plain string (a key, a token's text): its
  // closing quote within 16 bytes and nothing to check before it.
  bool ReadString(JsonString* out) {
#ifdef __SSE2__
    if (end_ - p_ >= 17 && *p_ == '"') {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_ + 1));
      const __m128i special =
          _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                    _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                       _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));  // signed: also bytes >= 0x80
      const int mask = _mm_movemask_epi8(special);
      if (mask != 0) {
        const int at = __builtin_ctz(static_cast<unsigned>(mask));
        if (p_[1 + at] == '"') {
          out->raw = std::string_view(p_ + 1, static_cast<size_t>(at));
          out->escaped = false;
          p_ += at + 2;
          return true;
        }
      }
    }
#endif
    return ReadStringSlow(out);
  }
  // A number token; *value is its double value (as nlohmann's get<double>()).
  bool ReadNumber(double* value);
  bool Skip();  // any value, validated

  // Object iteration: after Consume('{'), call NextMember until it returns false; `*key` is set
  // and the cursor stands before the member's value, which the caller must read or Skip().
  // *done is set when the object closed (returns false with *done == false on bad input).
  bool NextMember(bool first, JsonString* key, bool* done) {
    *done = false;
    SkipSpace();
    if (p_ >= end_) return false;
    if (*p_ == '}') {
      ++p_;
      *done = true;
      return false;
    }
    if (!first) {
      if (*p_ != ',') return false;
      ++p_;
      SkipSpace();
    }
    return ReadString(key) && Consume(':');
  }
  // Array iteration, likewise: true with the cursor before an element, false at ']' (*done) or
  // on bad input.
  bool NextElement(bool first, bool* done) {
    *done = false;
    SkipSpace();
    if (p_ >= end_) return false;
    if (*p_ == ']') {
      ++p_;
      *done = true;
      return false;
    }
    if (first) return true;
    if (*p_ != ',') return false;
    ++p_;
    return true;
  }
  // Counts the elements of an array (cursor at '['), validating them.
  bool CountElements(size_t* count);

 private:
  bool ReadStringSlow(JsonString* out);
  bool SkipLiteral(std::string_view literal);
  bool SkipNumber(double* value);

  const char* p_;
  const char* end_;
  const char* begin_;
  std::vector<char>* stack_;
};

// Decodes a validated raw JSON string (from JsonCursor) into UTF-8.
std::string Unescape(const JsonString& s);

// `s` decodes to exactly `want` (want has no escapes).
bool StringEquals(const JsonString& s, std::string_view want);

// Between quotes, `bytes` would be a valid JSON string without escapes: no quote, backslash or
// control byte, and valid UTF-8 (the rules ReadString checks).
bool IsPlainStringBody(std::string_view bytes);

}  // namespace servesweep::loadgen
