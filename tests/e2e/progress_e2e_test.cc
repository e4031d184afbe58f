// End-to-end: a sweep's progress lines (coordinator, agent and emulator as processes). Under a
// pseudo-terminal (`script` from util-linux) each run's line is redrawn in place with its
// done/total; through a pipe the output is plain lines, with no carriage return or escape code.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <regex>
#include <set>
#include <string>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// One run of 20 measured requests, one at a time, each ~100 ms: a few seconds of measuring, so
// the agent's once-a-second progress reports land while it lasts.
std::string Matrix(Harness& h, const std::string& name) {
  return h.WriteFile(name + ".yaml", SimMatrix(name, 1, 20, 1, 4, 60, 15));
}

TEST(ProgressEndToEnd, LiveLineUpdatedInPlaceUnderATerminal) {
  Harness h("progress-live");
  const std::string matrix = Matrix(h, "live");
  std::string output;
  // -e: script exits with the sweep's status; -q: no banner; the typescript goes to /dev/null.
  const int status =
      RunShell(fmt::format("COLUMNS=120 script -qec '{} run {} --out {}' /dev/null < /dev/null",
                           ServesweepBinary(), matrix, h.Path("out")),
               &output);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  ASSERT_EQ(WEXITSTATUS(status), 0) << output;

  // A carriage return that starts a line (not the terminal's "\r\n"), then the run's line.
  const std::regex live_line(R"(\r\[1/1\] concurrency=1 \| measuring (\d+)/20 req \| )");
  std::set<int> counts;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), live_line);
       it != std::sregex_iterator(); ++it) {
    counts.insert(std::stoi((*it)[1].str()));
  }
  ASSERT_FALSE(counts.empty()) << output;
  EXPECT_LT(*counts.begin(), 20) << "expected the line drawn while requests were still running";
  EXPECT_NE(output.find("\x1b[K"), std::string::npos) << "expected erase-to-end-of-line";
  // The run's permanent line once it ended, and no plain-mode lines on a terminal.
  EXPECT_TRUE(std::regex_search(
      output, std::regex(R"(\[1/1\] concurrency=1 \| done in [0-9.]+ s, 20/20 req)")))
      << output;
  EXPECT_EQ(output.find("progress: "), std::string::npos) << output;
  EXPECT_NE(output.find("servesweep: 1 runs: 1 done"), std::string::npos) << output;
}

TEST(ProgressEndToEnd, PlainLinesWithoutATerminal) {
  Harness h("progress-plain");
  const std::string matrix = Matrix(h, "plain");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, h.Path("out")), &output), 0)
      << output;
  EXPECT_EQ(output.find('\r'), std::string::npos) << output;
  EXPECT_EQ(output.find('\x1b'), std::string::npos) << output;
  EXPECT_NE(output.find("progress: [1/1] concurrency=1 | assigned"), std::string::npos) << output;
  EXPECT_TRUE(std::regex_search(
      output, std::regex(R"(progress: \[1/1\] concurrency=1 \| done in [0-9.]+ s, 20/20 req\n)")))
      << output;

  std::string off;
  ASSERT_EQ(
      RunServesweep(fmt::format("run {} --out {} --progress off", matrix, h.Path("off")), &off), 0)
      << off;
  EXPECT_EQ(off.find("progress: "), std::string::npos) << off;
  std::string bad;
  EXPECT_EQ(
      RunServesweep(fmt::format("run {} --out {} --progress fancy", matrix, h.Path("bad")), &bad),
      1);
  EXPECT_NE(bad.find("expected auto, live, plain or off, found 'fancy'"), std::string::npos) << bad;
}

}  // namespace
}  // namespace servesweep::testing
