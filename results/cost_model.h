// The one cost model of servesweep (engine_config.price in the matrix): what a run's measured
// window cost, from a GPU price per hour (GPUs of the layout x measured duration) or a managed
// API's token prices (input, output, and cached input where the prefix-cache hits are known).
// Used by the record columns (summary.csv) and the reports alike. docs/report.md#cost.
//
// Thread-safety: plain functions and values.
#pragma once

#include <string>

#include "schema/run_spec.capnp.h"

namespace servesweep::results {

struct Price {
  double gpu_hour = 0;               // per GPU per hour
  double input_per_mtok = 0;         // per million input (prompt) tokens
  double output_per_mtok = 0;        // per million output tokens
  double cached_input_per_mtok = 0;  // per million input tokens served from the prefix cache
  std::string currency;
  bool priced() const {
    return gpu_hour > 0 || input_per_mtok > 0 || output_per_mtok > 0 || cached_input_per_mtok > 0;
  }
};
Price PriceOf(schema::EngineConfig::Reader config);

// What the run measured (NaN where not known).
struct CostInputs {
  double gpu_count = 0;
  double duration_s = 0;  // the measured window
  double completed = 0;   // successful requests
  double input_tok = 0;   // over the successful requests
  double output_tok = 0;
  double cached_input_tok = 0;  // prefix-cache hit tokens; NaN when the engine does not say
};

struct Cost {
  bool priced = false;  // false: no price, or nothing measured to price (all figures NaN)
  double total = 0;
  double per_mtok_output = 0;  // total / output tokens * 10^6 (NaN without output tokens)
  double per_request = 0;      // total / successful requests (NaN without any)
  // How it was computed, e.g. "2 GPUs x 60.0 s x 3.5/h" or "input 1000 tok (200 cached) ...";
  // says when cached input tokens were not known (then all input is charged at the input price).
  std::string basis;
};
Cost CostOf(const Price& price, const CostInputs& inputs);

}  // namespace servesweep::results
