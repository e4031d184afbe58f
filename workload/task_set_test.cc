// Quality task sets: deterministic generation, JSONL loading and its errors, answer scoring
// (workload/task_set.h); the quality key of the matrix (matrix/matrix_loader.h).
#include "workload/task_set.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

namespace servesweep::workload {
namespace {

constexpr const char* kPinnedFirstPrompt =
    "Question: What is 20 * 15? Reply with the number only.\nAnswer:";

std::string TempFile(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("servesweep-task-set-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(TaskSet, ArithmeticIsDeterministicAndCorrect) {
  const auto a = GenerateArithmeticTasks(200, 7);
  const auto b = GenerateArithmeticTasks(200, 7);
  ASSERT_EQ(a.size(), 200u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].answer, b[i].answer);
  }
  // A fixed seed gives fixed tasks on every machine (no std:: distribution): pinned here.
  EXPECT_EQ(GenerateArithmeticTasks(1, 1)[0].prompt, kPinnedFirstPrompt);
  EXPECT_NE(GenerateArithmeticTasks(20, 8)[0].prompt + GenerateArithmeticTasks(20, 8)[1].prompt,
            a[0].prompt + a[1].prompt);
  // Every answer is the prompt's arithmetic; all three operations occur.
  const std::regex question(
      R"(^Question: What is (\d+) ([-+*]) (\d+)\? Reply with the number only\.\nAnswer:$)");
  std::set<char> ops;
  for (const auto& task : a) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(task.prompt, m, question)) << task.prompt;
    const long x = std::stol(m[1]), y = std::stol(m[3]);
    const char op = m[2].str()[0];
    ops.insert(op);
    const long want = op == '+' ? x + y : op == '-' ? x - y : x * y;
    EXPECT_EQ(task.answer, std::to_string(want)) << task.prompt;
  }
  EXPECT_EQ(ops.size(), 3u);
}

TEST(TaskSet, LoadsJsonlAndNamesFileLineOnErrors) {
  std::vector<QualityTask> tasks;
  const std::string good = TempFile(
      "good.jsonl",
      "{\"prompt\": \"Capital of France?\", \"answer\": \"Paris\"}\n\n{\"prompt\": \"2+2=\", "
      "\"answer\": 4}\n{\"prompt\": \"x\", \"answer\": \"y\"}\n");
  ASSERT_TRUE(LoadTaskJsonl(good, 0, &tasks).ok());
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].answer, "Paris");
  EXPECT_EQ(tasks[1].answer, "4");
  ASSERT_TRUE(LoadTaskJsonl(good, 2, &tasks).ok());
  EXPECT_EQ(tasks.size(), 2u);

  struct Case {
    std::string text, expected;
  };
  const std::vector<Case> cases = {
      {"{\"prompt\": \"a\", \"answer\": \"b\"}\n{not json\n", ":2: expected a JSON object"},
      {"\n{\"answer\": \"b\"}\n", ":2: expected a non-empty string \"prompt\", found none"},
      {"{\"prompt\": \"a\", \"answer\": [1]}\n",
       ":1: expected a string or number \"answer\", found [1]"},
      {"{\"prompt\": \"a\", \"answer\": \"  \"}\n", ":1: expected a non-empty \"answer\""},
      {"\n\n", "expected at least one task, found none"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = TempFile("bad" + std::to_string(i) + ".jsonl", cases[i].text);
    const Status s = LoadTaskJsonl(path, 0, &tasks);
    ASSERT_FALSE(s.ok()) << cases[i].text;
    EXPECT_EQ(s.message().rfind(path, 0), 0u) << s.message();
    EXPECT_NE(s.message().find(cases[i].expected), std::string::npos) << s.message();
  }
  EXPECT_FALSE(LoadTaskJsonl("/nonexistent/tasks.jsonl", 0, &tasks).ok());
}

TEST(TaskSet, ScoresExactMatchesAfterNormalisation) {
  EXPECT_EQ(FirstNumber(" 95 t1 t2").value_or("none"), "95");
  EXPECT_EQ(FirstNumber(" t0 t1 -12 x").value_or("none"), "-12");  // "t0" is a word, not 0
  EXPECT_EQ(FirstNumber("The answer is 1,234? no: 42.50.").value_or("none"), "1");
  EXPECT_EQ(FirstNumber("x=42.50").value_or("none"), "42.5");
  EXPECT_EQ(FirstNumber("7.0").value_or("none"), "7");
  EXPECT_FALSE(FirstNumber("no digits t3").has_value());

  EXPECT_TRUE(AnswerMatches("95", " 95 t1 t2 t3", true));
  EXPECT_TRUE(AnswerMatches("-3", "\n-3\n", true));
  EXPECT_TRUE(AnswerMatches("95", "95.0", true));
  EXPECT_FALSE(AnswerMatches("95", " 96 t1", true));
  EXPECT_FALSE(AnswerMatches("95", " t0 t1", true));
  EXPECT_FALSE(AnswerMatches("95", " 195", true));
  EXPECT_TRUE(AnswerMatches("Paris", "  Paris\n", false));
  EXPECT_FALSE(AnswerMatches("Paris", "Paris, France", false));
  EXPECT_FALSE(AnswerMatches("Paris", "paris", false));
}

}  // namespace
}  // namespace servesweep::workload
