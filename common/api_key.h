// API keys for managed endpoints: read from an environment variable or a file, never from a
// command line or a matrix, and never put into a message (errors name the source, not the key).
//
// Thread-safety: reads the environment and the file system; no state of its own.
#pragma once

#include <string>

#include "common/status.h"

namespace servesweep {

// The key from `env_name` (an environment variable) or, when that is empty, from `file_path`
// (its first line, surrounding whitespace trimmed). `what_env` / `what_file` name the settings
// in errors ("engine_config.api_key_env"). Neither given: an empty key and Ok.
Status ReadApiKey(const std::string& env_name, const std::string& what_env,
                  const std::string& file_path, const std::string& what_file, std::string* key);

}  // namespace servesweep
