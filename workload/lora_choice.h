// Multi-LoRA traffic (`engine_config.lora` and `workload.lora`, docs/matrix.md#multi-lora): which
// adapter each measured request names, and how a request names it in each engine's API.
//
// The choice is a pure function of (seed, request index), so the same run sends the same
// adapters whichever load thread sends them, and a test can count them against the weights:
//   uniform: every adapter 1 / n;
//   zipf:    the k-th adapter (1-based, in the matrix's order) 1 / k^s, normalised (s = skew > 0);
//   trace:   the plan's adapter names (a Mooncake trace's "adapter" field).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "schema/run_spec.capnp.h"

namespace servesweep::workload {

// What a request naming one adapter sends.
//   vLLM and the emulator: `model` is the adapter's name (vllm serving_models: the LoRA's name
//     is a served model).
//   SGLang: `model` is "<served model>:<adapter>" (sglang serving_base.py
//     _parse_model_parameter: a model without ':' selects no adapter).
//   llama.cpp: `model` is the base's; `lora: [{"id": k, "scale": 1}]` (adapters not listed run
//     at scale 0; the ids are the --lora order). A base request lists every adapter at scale 0.
struct AdapterRequest {
  std::string name;      // the adapter's name ("" = the base model)
  std::string model;     // the request's model field
  int32_t lora_id = -1;  // llama.cpp's adapter id; -1 where the engine takes none
};

// The cumulative weights of `count` adapters for a choice ("uniform" or "zipf"; the last is 1).
// InvalidArgument for another choice, count 0 or a skew that is not > 0.
Status AdapterCumulativeWeights(const std::string& choice, double zipf_skew, size_t count,
                                std::vector<double>* out);

// The adapter (index into the weights) of request `request_index` of a run seeded `seed`.
int32_t PickAdapter(uint64_t seed, uint64_t request_index, const std::vector<double>& cumulative);

// Each adapter of the spec's engine_config.lora as its requests name it on the spec's engine,
// in the matrix's order; empty without adapters.
std::vector<AdapterRequest> AdapterRequestsFor(schema::RunSpec::Reader spec);

}  // namespace servesweep::workload
