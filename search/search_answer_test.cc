// The answer's pages: the winner and its evidence in search.md, the frontier plotted over the
// counted runs only, and report.html carrying both plots and every section of search.md (its
// image line replaced by the plot), with results' text escaped.
#include "search/search_answer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::search {
namespace {

SearchStep Step(int round, size_t configuration, double level, bool meets, double tok_per_user,
                double tok_per_gpu) {
  SearchStep s;
  s.round = round;
  s.configuration = configuration;
  s.level = level;
  s.run_id = "r" + std::to_string(round) + "-" + std::to_string(configuration);
  s.meets = meets;
  s.binding = meets ? "" : "ttft_p90_ms";
  s.objective = tok_per_gpu;
  s.predicted_objective = tok_per_gpu * 1.1;
  s.figures = {{"decode_median_tok_per_s", tok_per_user},
               {"output_throughput_per_gpu", tok_per_gpu}};
  return s;
}

class SearchAnswerPages : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.objective = Objective::kMaxOutputTokPerSPerGpu;
    spec_.constraints.push_back({"ttft_p90_ms", true, 250});
    result_.configurations.resize(2);
    auto& won = result_.configurations[0];
    won.status = ConfigurationStatus::kFound;
    won.limit = 8;
    won.lowest_failing = 9;
    won.uncertainty = 0.125;
    won.objective = 900;
    won.binding = "ttft_p90_ms";
    won.runs = 3;
    won.prediction.objective = 1000;
    result_.configurations[1].status = ConfigurationStatus::kPruned;
    result_.configurations[1].why = "optimistic 500 < the leader's 900";
    result_.configurations[1].prediction.objective = 400;
    result_.winner = 0;
    result_.rounds = 3;
    result_.steps = {Step(1, 0, 4, true, 120, 600), Step(2, 0, 8, true, 80, 900),
                     Step(3, 0, 16, false, 40, 1100)};
    SearchStep uncounted = Step(3, 1, 2, false, 500, 5000);
    uncounted.not_counted = "client-bound: <loadgen>";
    result_.steps.push_back(uncounted);
  }
  SearchAnswer Answer() const {
    return SearchAnswer{
        spec_, {{"tp=1 <fast>", "a", 1}, {"tp=2", "b", 2}}, result_, 4000, true, false, 12};
  }
  SearchSpec spec_;
  SearchResult result_;
};

TEST_F(SearchAnswerPages, TheMarkdownNamesTheWinnerItsEvidenceAndWhatWasSpent) {
  const std::string md = SearchAnswerMarkdown(Answer());
  EXPECT_NE(md.find("## Winner: tp=1 <fast>"), std::string::npos) << md;
  EXPECT_NE(md.find("the limit is within 12.5%); bound by ttft_p90_ms"), std::string::npos) << md;
  EXPECT_NE(md.find("optimistic 500 < the leader's 900"), std::string::npos) << md;
  EXPECT_NE(md.find("![The search's path"), std::string::npos);
  EXPECT_NE(md.find("## Pareto frontier of what was measured"), std::string::npos);
}

TEST_F(SearchAnswerPages, TheFrontierPlotsCountedRunsOnly) {
  const std::string svg = SearchFrontierSvg(Answer());
  EXPECT_NE(svg.find("Pareto frontier"), std::string::npos) << svg;
  // The uncounted run (5,000 tok/s per GPU) is no point of it: the y axis stays near 1.1k.
  EXPECT_EQ(svg.find(">5k<"), std::string::npos) << svg;
  EXPECT_NE(svg.find("tp=1 &lt;fast&gt;"), std::string::npos);
}

TEST_F(SearchAnswerPages, TheHtmlPageHasBothPlotsAndEverySectionOfTheMarkdown) {
  const SearchAnswer answer = Answer();
  const std::string md = SearchAnswerMarkdown(answer);
  const std::string html = SearchAnswerHtml(answer, md);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("id=\"plot-search-path\""), std::string::npos) << html;
  EXPECT_NE(html.find("id=\"plot-search-frontier\""), std::string::npos) << html;
  for (const char* section : {"Winner: tp=1 &lt;fast&gt;", "Ranking", "The search&#39;s path",
                              "Pareto frontier of what was measured"}) {
    EXPECT_NE(html.find(section), std::string::npos) << section;
  }
  EXPECT_EQ(html.find("!["), std::string::npos);            // the image line became the plot
  EXPECT_EQ(html.find("<loadgen>"), std::string::npos);     // escaped
  EXPECT_EQ(html.find("<h1>Search:"), html.rfind("<h1>"));  // one title
  EXPECT_EQ(html.find("PREDICTED ONLY"), std::string::npos);
  SearchAnswer predicted = answer;
  predicted.predict_only = true;
  EXPECT_NE(SearchAnswerHtml(predicted, md).find("PREDICTED ONLY"), std::string::npos);
}

}  // namespace
}  // namespace servesweep::search
