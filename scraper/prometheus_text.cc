#include "scraper/prometheus_text.h"

#include <cstdlib>
#include <string>

namespace servesweep::scraper {

std::vector<PromSample> ParsePrometheusText(std::string_view text, size_t* skipped) {
  std::vector<PromSample> out;
  size_t bad = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;

    PromSample sample;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos || name_end == 0) {
      ++bad;
      continue;
    }
    sample.name = std::string(line.substr(0, name_end));
    std::string_view rest = line.substr(name_end);
    if (rest.front() == '{') {
      // Label values may contain '}' inside quotes; find the closing brace outside quotes.
      bool quoted = false;
      size_t close = std::string_view::npos;
      for (size_t i = 1; i < rest.size(); ++i) {
        if (rest[i] == '\\') {
          ++i;
        } else if (rest[i] == '"') {
          quoted = !quoted;
        } else if (rest[i] == '}' && !quoted) {
          close = i;
          break;
        }
      }
      if (close == std::string_view::npos) {
        ++bad;
        continue;
      }
      sample.labels = std::string(rest.substr(1, close - 1));
      rest = rest.substr(close + 1);
    }
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const std::string value_text(rest.substr(0, rest.find(' ')));  // a timestamp may follow
    char* end = nullptr;
    sample.value = std::strtod(value_text.c_str(), &end);
    if (value_text.empty() || end != value_text.c_str() + value_text.size()) {
      ++bad;
      continue;
    }
    out.push_back(std::move(sample));
  }
  if (skipped) *skipped = bad;
  return out;
}

}  // namespace servesweep::scraper
