#include "submit/template_renderer.h"

#include <fmt/format.h>

namespace servesweep::submit {

Status RenderTemplate(std::string_view template_name, std::string_view text,
                      const std::map<std::string, std::string>& values, std::string* out) {
  out->clear();
  size_t line = 1;
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find("{{", at);
    const std::string_view before =
        text.substr(at, open == std::string_view::npos ? text.size() - at : open - at);
    for (char c : before) line += c == '\n';
    out->append(before);
    if (open == std::string_view::npos) break;
    const size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: expected '}}}}' to close a placeholder, found none", template_name, line));
    }
    const std::string name(text.substr(open + 2, close - open - 2));
    auto value = values.find(name);
    if (value == values.end()) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: no value for placeholder {{{{{}}}}}", template_name, line, name));
    }
    out->append(value->second);
    at = close + 2;
  }
  return Status::Ok();
}

std::string ShellQuote(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace servesweep::submit
