#include "common/file_text.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace servesweep {

Status ReadWholeFile(const std::string& path, std::string_view what, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("{}: cannot open {}", path, what));
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return Status::Ok();
}

}  // namespace servesweep
