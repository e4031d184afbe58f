// The performance model's flags that `plan` and `search` share: which hardware a run that names
// none is on, engine profiles that replace the shipped choice, and the error bands runs are
// labelled (and a search prunes) with.
//
// Thread-safety: call from the main thread.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "record/virtual_run.h"

namespace servesweep::cli {

struct ModelFlags {
  std::string hardware;
  std::vector<std::string> engine_profiles;  // replace the shipped choice for their engines
  std::string error_bands;                   // replaces profiles/error_bands.yaml
};

void AddModelFlags(CLI::App& cmd, ModelFlags& flags);

// The virtual runs' options; an error names the flag when a profile or a band file does not load.
Status VirtualRunOptionsFrom(const ModelFlags& flags, record::VirtualRunOptions* out);

}  // namespace servesweep::cli
