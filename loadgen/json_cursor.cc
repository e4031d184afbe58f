#include "loadgen/json_cursor.h"

#include <cstdlib>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace servesweep::loadgen {
namespace {

// The first byte in [p, end) that needs a look inside a string: '"', '\\', a control byte
// (< 0x20, invalid unescaped) or a non-ASCII byte (to validate UTF-8). Sixteen bytes at a time.
const char* FindStringSpecial(const char* p, const char* end) {
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches them.
    const __m128i special =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmplt_epi8(v, space));
    const int mask = _mm_movemask_epi8(special);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
  }
  return end;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits at p (p + 4 <= end checked by the caller); -1 when not hex.
int Hex4(const char* p) {
  int v = 0;
  for (int i = 0; i < 4; ++i) {
    const int h = HexValue(p[i]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

bool InRange(const char* p, const char* end, unsigned char lo, unsigned char hi) {
  if (p >= end) return false;
  const auto c = static_cast<unsigned char>(*p);
  return c >= lo && c <= hi;
}

// One UTF-8 sequence at p (its first byte >= 0x80), with RFC 3629's exact ranges (no
// overlongs, no surrogates, nothing above U+10FFFF): the table nlohmann's lexer checks.
// Returns its length, 0 when invalid.
int Utf8Length(const char* p, const char* end) {
  const auto c = static_cast<unsigned char>(*p);
  if (c >= 0xC2 && c <= 0xDF) return InRange(p + 1, end, 0x80, 0xBF) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = c == 0xED ? 0x9F : 0xBF;
    return InRange(p + 1, end, lo, hi) && InRange(p + 2, end, 0x80, 0xBF) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;
    return InRange(p + 1, end, lo, hi) && InRange(p + 2, end, 0x80, 0xBF) &&
                   InRange(p + 3, end, 0x80, 0xBF)
               ? 4
               : 0;
  }
  return 0;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

bool IsPlainStringBody(std::string_view bytes) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while ((p = FindStringSpecial(p, end)) != end) {
    if (static_cast<unsigned char>(*p) < 0x80) return false;  // a quote, backslash or control
    const int n = Utf8Length(p, end);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

JsonCursor::JsonCursor(std::string_view doc, std::vector<char>* stack)
    : p_(doc.data()), end_(doc.data() + doc.size()), begin_(doc.data()), stack_(stack) {
  stack_->clear();
}

bool JsonCursor::SkipBom() {
  if (p_ != begin_ || p_ == end_ || static_cast<unsigned char>(*p_) != 0xEF) return true;
  if (end_ - p_ < 3 || static_cast<unsigned char>(p_[1]) != 0xBB ||
      static_cast<unsigned char>(p_[2]) != 0xBF) {
    return false;
  }
  p_ += 3;
  return true;
}

bool JsonCursor::ReadStringSlow(JsonString* out) {
  if (p_ >= end_ || *p_ != '"') return false;
  const char* start = ++p_;
  bool escaped = false;
  for (;;) {
    p_ = FindStringSpecial(p_, end_);
    if (p_ == end_) return false;
    const auto c = static_cast<unsigned char>(*p_);
    if (c == '"') {
      out->raw = std::string_view(start, static_cast<size_t>(p_ - start));
      out->escaped = escaped;
      ++p_;
      return true;
    }
    if (c < 0x20) return false;
    if (c >= 0x80) {
      const int n = Utf8Length(p_, end_);
      if (n == 0) return false;
      p_ += n;
      continue;
    }
    // A backslash escape.
    escaped = true;
    if (end_ - p_ < 2) return false;
    switch (p_[1]) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        p_ += 2;
        continue;
      case 'u':
        break;
      default:
        return false;
    }
    if (end_ - p_ < 6) return false;
    const int cp = Hex4(p_ + 2);
    if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return false;  // a lone low surrogate
    p_ += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half must follow
      if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u') return false;
      const int low = Hex4(p_ + 2);
      if (low < 0xDC00 || low > 0xDFFF) return false;
      p_ += 6;
    }
  }
}

bool JsonCursor::SkipNumber(double* value) {
  const char* start = p_;
  bool negative = false;
  if (p_ < end_ && *p_ == '-') {
    negative = true;
    ++p_;
  }
  if (p_ >= end_ || !IsDigit(*p_)) return false;
  const char* int_begin = p_;
  if (*p_ == '0') {
    ++p_;
  } else {
    while (p_ < end_ && IsDigit(*p_)) ++p_;
  }
  const size_t int_digits = static_cast<size_t>(p_ - int_begin);
  bool is_float = false;
  if (p_ < end_ && *p_ == '.') {
    is_float = true;
    ++p_;
    if (p_ >= end_ || !IsDigit(*p_)) return false;
    while (p_ < end_ && IsDigit(*p_)) ++p_;
  }
  int64_t exponent = 0;
  if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
    is_float = true;
    ++p_;
    bool exponent_negative = false;
    if (p_ < end_ && (*p_ == '+' || *p_ == '-')) exponent_negative = *p_++ == '-';
    if (p_ >= end_ || !IsDigit(*p_)) return false;
    while (p_ < end_ && IsDigit(*p_)) {
      if (exponent < 1'000'000) exponent = exponent * 10 + (*p_ - '0');
      ++p_;
    }
    if (exponent_negative) exponent = -exponent;
  }
  // Small integers: exact without strtod (the common case: counts, timestamps).
  if (!is_float && int_digits <= 15) {
    if (value) {
      int64_t v = 0;
      for (const char* q = int_begin; q < p_; ++q) v = v * 10 + (*q - '0');
      *value = negative ? -static_cast<double>(v) : static_cast<double>(v);
    }
    return true;
  }
  // Below 10^307 a number cannot overflow a double (underflow to 0 is no error for nlohmann):
  // skip strtod when the value is not wanted.
  const bool leading_zero = int_digits == 1 && *int_begin == '0';
  const int64_t magnitude_digits = (leading_zero ? 0 : static_cast<int64_t>(int_digits)) + exponent;
  if (!value && magnitude_digits <= 307) return true;
  // nlohmann converts with strtod (after strtoull/strtoll for integers, which round the same
  // way when converted to double) and rejects a result that is not finite.
  const std::string token(start, p_);
  const double v = std::strtod(token.c_str(), nullptr);
  if (!(v <= 1.7976931348623157e308 && v >= -1.7976931348623157e308)) return false;
  if (value) *value = v;
  return true;
}

bool JsonCursor::ReadNumber(double* value) {
  SkipSpace();
  return SkipNumber(value);
}

bool JsonCursor::SkipLiteral(std::string_view literal) {
  if (static_cast<size_t>(end_ - p_) < literal.size() ||
      std::string_view(p_, literal.size()) != literal) {
    return false;
  }
  p_ += literal.size();
  return true;
}

bool JsonCursor::CountElements(size_t* count) {
  *count = 0;
  if (!Consume('[')) return false;
  bool done = false;
  for (bool first = true;; first = false) {
    if (!NextElement(first, &done)) return done;
    if (!Skip()) return false;
    ++*count;
  }
}

bool JsonCursor::Skip() {
  const size_t base = stack_->size();
  for (;;) {
    // One value, or the opening of a non-empty container.
    SkipSpace();
    if (p_ >= end_) return false;
    const char c = *p_;
    if (c == '{' || c == '[') {
      ++p_;
      SkipSpace();
      const char close = c == '{' ? '}' : ']';
      if (p_ < end_ && *p_ == close) {
        ++p_;
      } else {
        stack_->push_back(c);
        if (c == '{') {
          JsonString key;
          if (!ReadString(&key) || !Consume(':')) return false;
        }
        continue;
      }
    } else if (c == '"') {
      JsonString s;
      if (!ReadString(&s)) return false;
    } else if (c == 't') {
      if (!SkipLiteral("true")) return false;
    } else if (c == 'f') {
      if (!SkipLiteral("false")) return false;
    } else if (c == 'n') {
      if (!SkipLiteral("null")) return false;
    } else if (c == '-' || IsDigit(c)) {
      if (!SkipNumber(nullptr)) return false;
    } else {
      return false;
    }
    // A value ended: close the containers it ends, or move to the next element.
    for (;;) {
      if (stack_->size() == base) return true;
      SkipSpace();
      if (p_ >= end_) return false;
      const char top = stack_->back();
      if (*p_ == ',') {
        ++p_;
        if (top == '{') {
          SkipSpace();
          JsonString key;
          if (!ReadString(&key) || !Consume(':')) return false;
        }
        break;
      }
      if (*p_ != (top == '{' ? '}' : ']')) return false;
      ++p_;
      stack_->pop_back();
    }
  }
}

std::string Unescape(const JsonString& s) {
  std::string out;
  out.reserve(s.raw.size());
  const char* p = s.raw.data();
  const char* end = p + s.raw.size();
  while (p < end) {
    if (*p != '\\') {
      out.push_back(*p++);
      continue;
    }
    const char e = p[1];
    p += 2;
    switch (e) {
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        auto cp = static_cast<uint32_t>(Hex4(p));
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {  // validated: a low surrogate follows
          const auto low = static_cast<uint32_t>(Hex4(p + 2));
          p += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        AppendUtf8(cp, &out);
        break;
      }
      default:  // '"', '\\', '/'
        out.push_back(e);
    }
  }
  return out;
}

bool StringEquals(const JsonString& s, std::string_view want) {
  return s.escaped ? Unescape(s) == want : s.raw == want;
}

}  // namespace servesweep::loadgen
