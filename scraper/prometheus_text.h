// A reader of the Prometheus text exposition format (what vLLM, SGLang and llama.cpp serve on
// /metrics): samples as (name, labels, value); comments, HELP and TYPE lines skipped.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace servesweep::scraper {

struct PromSample {
  std::string name;
  std::string labels;  // the raw text between braces, "" when none
  double value = 0;
};

// Malformed lines are skipped; their count is returned through *skipped when given.
std::vector<PromSample> ParsePrometheusText(std::string_view text, size_t* skipped = nullptr);

}  // namespace servesweep::scraper
