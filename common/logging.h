// Logging setup: one spdlog logger to stderr per process, named after its role, so interleaved
// output of the coordinator, agents and engines in one terminal can be told apart.
//
// Thread-safety: call SetupLogging() once, early in main(); logging itself is thread-safe.
#pragma once

#include <string_view>

namespace servesweep {

// level: "trace", "debug", "info", "warn", "error"; unknown values fall back to "info".
void SetupLogging(std::string_view role, std::string_view level);

}  // namespace servesweep
