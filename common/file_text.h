// A whole file read into a string, or NotFound naming the file and what it was to be
// ("<path>: cannot open the engine profile"). For the inputs read once (profiles, tables,
// prompt files), not for streams.
//
// Thread-safety: a function of its arguments.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace servesweep {

Status ReadWholeFile(const std::string& path, std::string_view what, std::string* out);

}  // namespace servesweep
