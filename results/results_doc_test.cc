// docs/results.md must document every column of summary.csv (the record columns table).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "results/record_columns.h"

namespace servesweep::results {
namespace {

// The names a doc mentions in backticks, with `a_{x,y}_b` expanded to a_x_b and a_y_b.
std::set<std::string> DocumentedNames(const std::string& text) {
  std::set<std::string> names;
  const std::regex code("`([a-z0-9_{},]+)`");
  for (std::sregex_iterator it(text.begin(), text.end(), code), end; it != end; ++it) {
    const std::string name = (*it)[1];
    const size_t open = name.find('{');
    const size_t close = name.find('}');
    if (open == std::string::npos || close == std::string::npos) {
      names.insert(name);
      continue;
    }
    std::stringstream alternatives(name.substr(open + 1, close - open - 1));
    std::string alternative;
    while (std::getline(alternatives, alternative, ',')) {
      names.insert(name.substr(0, open) + alternative + name.substr(close + 1));
    }
  }
  return names;
}

TEST(ResultsDoc, EveryRecordColumnIsDocumented) {
  std::ifstream in(SERVESWEEP_SOURCE_DIR "/docs/results.md");
  ASSERT_TRUE(in) << "docs/results.md missing";
  std::stringstream buffer;
  buffer << in.rdbuf();
  const auto documented = DocumentedNames(buffer.str());
  for (const auto& column : RecordColumns()) {
    EXPECT_TRUE(documented.count(column.name))
        << "docs/results.md does not document '" << column.name << "'";
  }
  for (const char* summary_only :
       {"run_id", "run_index", "label", "status", "attempts", "last_error"}) {
    EXPECT_TRUE(documented.count(summary_only)) << summary_only;
  }
}

}  // namespace
}  // namespace servesweep::results
