// A search's answer as its reader sees it: search.json (every figure, nulls for what is
// unknown), search.md (the winner with its evidence, what was spent, the ranking with measured
// and predicted figures marked, the path, the model's error as it went, the Pareto frontier),
// the path and the frontier as SVG plots, and report.html: one self-contained page of the plots
// followed by search.md as HTML, so the two never disagree (docs/search.md#the-answer).
//
// Thread-safety: plain functions over the caller's data.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "search/search_loop.h"
#include "search/search_spec.h"

namespace servesweep::search {

// What the answer names of a configuration.
struct AnsweredConfiguration {
  std::string label;   // the matrix's axis values without the load
  std::string ladder;  // matrix::LoadLadderOf of its runs
  uint32_t gpus = 0;
};

struct SearchAnswer {
  const SearchSpec& spec;
  std::vector<AnsweredConfiguration> configurations;  // as the result's, by index
  const SearchResult& result;
  double exhaustive_gpu_s = 0;  // the model's estimate for the matrix's exhaustive grid
  bool exhaustive_known = false;
  bool predict_only = false;   // the model stood in for every run
  double kept_idle_gpu_s = 0;  // GPUs held by engines kept between rounds (at most)
};

nlohmann::json SearchAnswerJson(const SearchAnswer& answer);
// Shows the path plot as search.svg, beside it.
std::string SearchAnswerMarkdown(const SearchAnswer& answer);
// Each configuration's levels in the order they ran (x: the run's number), failing ones marked.
std::string SearchPathSvg(const SearchAnswer& answer);
// Output tok/s per GPU against tok/s per user of every counted run, each configuration a
// series, the frontier over all of them a line.
std::string SearchFrontierSvg(const SearchAnswer& answer);
// report.html: both plots inline, then `markdown` (SearchAnswerMarkdown's) as HTML, its image
// line replaced by the path plot it names.
std::string SearchAnswerHtml(const SearchAnswer& answer, const std::string& markdown);

}  // namespace servesweep::search
