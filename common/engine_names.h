// The engines this build can launch, by the name a matrix gives (`engine: vllm`). One list: the
// matrix loader refuses any other name before a GPU is spent, agents announce these in their
// inventory, and engines/engine_registry.cc has an adapter for each (its test checks).
//
// Thread-safety: a constant.
#pragma once

#include <string>
#include <vector>

namespace servesweep {

inline const std::vector<std::string>& EngineNames() {
  static const std::vector<std::string> names = {"sim",      "vllm",     "sglang",
                                                 "llamacpp", "template", "external"};
  return names;
}

}  // namespace servesweep
