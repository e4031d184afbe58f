// Quality task sets: deterministic generation, JSONL loading and its errors, answer scoring
// (workload/task_set.h); the quality key of the matrix (coordinator/matrix_loader.h).
#include "workload/task_set.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "coordinator/matrix_loader.h"

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

TEST(TaskSet, MatrixExpandsTheTaskSetIntoEveryRun) {
  const std::string base = R"(name: t
engine: sim
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3, concurrency: 1}
)";
  coordinator::LoadedMatrix m;
  ASSERT_TRUE(coordinator::ExpandMatrix("m.yaml",
                                        base + "quality: {task_set: arithmetic, count: 5, seed: 3, "
                                               "margin: 0.02}\naxes:\n  sim: [{answer_accuracy: "
                                               "1}, {answer_accuracy: 0.5}]\n",
                                        &m)
                  .ok());
  const auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 2u);
  const auto expected = GenerateArithmeticTasks(5, 3);
  for (auto run : runs) {
    const auto q = run.getQuality();
    EXPECT_EQ(q.getTaskSet(), "arithmetic");
    EXPECT_TRUE(q.getNumericAnswers());
    EXPECT_DOUBLE_EQ(q.getMarginAccuracy(), 0.02);
    EXPECT_EQ(q.getMaxTokens(), 16u);
    ASSERT_EQ(q.getTasks().size(), 5u);
    EXPECT_EQ(q.getTasks()[4].getPrompt(), expected[4].prompt);
    EXPECT_EQ(q.getTasks()[4].getAnswer(), expected[4].answer);
  }
  EXPECT_DOUBLE_EQ(runs[0].getSim().getAnswerAccuracy(), 1);
  EXPECT_DOUBLE_EQ(runs[1].getSim().getAnswerAccuracy(), 0.5);

  // A JSONL file relative to the matrix.
  const std::string tasks = TempFile("qa.jsonl", "{\"prompt\": \"p\", \"answer\": \"a\"}\n");
  const std::string matrix_path =
      (std::filesystem::path(tasks).parent_path() / "matrix.yaml").string();
  coordinator::LoadedMatrix j;
  ASSERT_TRUE(
      coordinator::ExpandMatrix(matrix_path, base + "quality: {task_set: qa.jsonl}\n", &j).ok());
  EXPECT_EQ(j.matrix().getRuns()[0].getQuality().getTaskSet(), "jsonl:qa.jsonl");
  EXPECT_FALSE(j.matrix().getRuns()[0].getQuality().getNumericAnswers());
  EXPECT_EQ(j.matrix().getRuns()[0].getQuality().getTasks().size(), 1u);

  // Errors: position, expected, found.
  auto error = [&](const std::string& extra) {
    coordinator::LoadedMatrix bad;
    const Status s = coordinator::ExpandMatrix(matrix_path, base + extra, &bad);
    return s.ok() ? std::string("ok") : s.message();
  };
  EXPECT_NE(error("quality: {task_set: arithmetic, cout: 5}\n")
                .find("unknown key 'cout' in quality (did you mean 'count'?)"),
            std::string::npos);
  EXPECT_NE(error("quality: {count: 5}\n").find("expected 'task_set' in 'quality'"),
            std::string::npos);
  EXPECT_NE(error("quality: {task_set: tasks.txt}\n").find("found 'tasks.txt'"), std::string::npos);
  EXPECT_NE(error("quality: {task_set: missing.jsonl}\n").find("missing.jsonl: cannot open"),
            std::string::npos);
  TempFile("broken.jsonl", "{\"prompt\": \"p\", \"answer\": \"a\"}\n[1]\n");
  EXPECT_NE(
      error("quality: {task_set: broken.jsonl}\n").find("broken.jsonl:2: expected a JSON object"),
      std::string::npos);
  EXPECT_NE(error("sim: {answer_accuracy: 1.5}\n").find("probability in [0, 1], found 1.5"),
            std::string::npos);
}

TEST(TaskSet, QualityGateExampleExpands) {
  coordinator::LoadedMatrix m;
  const Status s =
      coordinator::LoadMatrixFile(SERVESWEEP_SOURCE_DIR "/examples/quality-gate.yaml", &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].getQuality().getTasks().size(), 50u);
  EXPECT_DOUBLE_EQ(runs[1].getSim().getAnswerAccuracy(), 0.5);
  EXPECT_EQ(runs[0].getCompareGroup(), runs[1].getCompareGroup());
}

}  // namespace
}  // namespace servesweep::workload
