// Matrix zip groups, `where`/`exclude` conditions, `compare` groups and `baseline`
// (matrix/matrix_loader.h), and the condition expressions themselves
// (matrix/matrix_expression.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "matrix/matrix_expression.h"
#include "matrix/matrix_loader.h"

namespace servesweep::matrix {
namespace {

const char* kBase = R"(name: t
engine: sim
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3}
)";

Status Expand(const std::string& more, LoadedMatrix* out) {
  return ExpandMatrix("m.yaml", std::string(kBase) + more, out);
}

std::vector<std::string> Labels(LoadedMatrix& m) {
  std::vector<std::string> out;
  for (auto run : m.matrix().getRuns()) out.push_back(run.getLabel());
  return out;
}

bool Eval(const std::string& text, const std::map<std::string, ExpressionValue>& vars,
          Status* status = nullptr) {
  std::unique_ptr<Expression> e;
  Status s = Expression::Parse(text, &e);
  bool holds = false;
  if (s.ok()) {
    s = e->Holds(
        [&](const std::string& name) -> std::optional<ExpressionValue> {
          auto it = vars.find(name);
          if (it == vars.end()) return std::nullopt;
          return it->second;
        },
        &holds);
  }
  if (status) *status = s;
  return holds;
}

TEST(MatrixExpression, ArithmeticComparisonsAndLogic) {
  const std::map<std::string, ExpressionValue> v = {
      {"tp", 4.0}, {"pp", 2.0}, {"nodes", 1.0}, {"gpus_per_node", 8.0}, {"engine", "sglang"}};
  EXPECT_TRUE(Eval("tp * pp <= gpus_per_node * nodes", v));
  EXPECT_FALSE(Eval("tp * pp * 2 <= gpus_per_node * nodes", v));
  EXPECT_TRUE(Eval("engine == 'sglang' and tp > 2", v));
  EXPECT_FALSE(Eval("engine == \"vllm\" or not tp >= 4", v));
  EXPECT_TRUE(Eval("(tp + pp) * 2 == 12 and -tp < 0 and tp % 3 == 1 and tp / 8 == 0.5", v));
  EXPECT_TRUE(Eval("engine != 'vllm'", v));
  EXPECT_TRUE(Eval("order == 1", {{"order", 1.0}}));  // "or" inside a name is not the operator
}

TEST(MatrixExpression, ErrorsNameTheColumn) {
  Status s;
  Eval("tp * (pp + 1", {{"tp", 1.0}, {"pp", 1.0}}, &s);
  EXPECT_EQ(s.message(), "column 13: expected ')'");
  Eval("tp <= 8 8", {{"tp", 1.0}}, &s);
  EXPECT_EQ(s.message(), "column 9: expected an operator or the end, found '8'");
  Eval("tpp <= 8", {{"tp", 1.0}}, &s);
  EXPECT_EQ(s.message(), "column 1: unknown variable 'tpp'");
  Eval("engine < 'x'", {{"engine", "sim"}}, &s);
  EXPECT_EQ(s.message(),
            "column 8: expected '<' between two numbers, or ==/!= between two strings; found a "
            "string and a string");
  Eval("engine", {{"engine", "sim"}}, &s);
  EXPECT_EQ(s.message(), "expected a condition (a comparison or a number), found a string");
  Eval("tp / 0 > 1", {{"tp", 1.0}}, &s);
  EXPECT_EQ(s.message(), "column 4: division by zero in '/'");
}

// Found while writing the matrix fuzz target: parsing, evaluating and freeing an expression recurse
// over its tree, so deep nesting or a huge expression overflowed the stack. Both are now refused.
TEST(MatrixExpression, DeepOrHugeExpressionsAreRefusedWithoutOverflowingTheStack) {
  Status s;
  const std::map<std::string, ExpressionValue> v = {{"tp", 1.0}};
  Eval(std::string(200000, '(') + "tp" + std::string(200000, ')') + " == 1", v, &s);
  EXPECT_EQ(s.message(), "expected an expression of at most 4096 characters, found 400007");
  std::string sum = "tp";
  for (int i = 0; i < 100000; ++i) sum += "+1";
  Eval(sum + " > 0", v, &s);
  EXPECT_FALSE(s.ok());
  Eval(std::string(65, '(') + "tp" + std::string(65, ')') + " == 1", v, &s);
  EXPECT_EQ(s.message(), "column 65: expected at most 64 nested parentheses, not or unary minus");
  std::string nots;
  for (int i = 0; i < 65; ++i) nots += "not ";
  Eval(nots + "tp == 1", v, &s);
  EXPECT_FALSE(s.ok());
  Eval(std::string(65, '-') + "tp < 0", v, &s);
  EXPECT_FALSE(s.ok());
  // Nesting within the limits still parses.
  EXPECT_TRUE(Eval(std::string(64, '(') + "tp" + std::string(64, ')') + " == 1", v, &s));
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(MatrixConditions, ZipGroupsVaryKeysTogether) {
  LoadedMatrix m;
  ASSERT_TRUE(Expand(R"(zip:
  - engine_version: [a, b]
    engine_flags: [["--x"], ["--y", "1"]]
axes:
  concurrency: [1, 4]
)",
                     &m)
                  .ok());
  EXPECT_EQ(Labels(m),
            (std::vector<std::string>{"concurrency=1 engine_version=a engine_flags=...",
                                      "concurrency=1 engine_version=b engine_flags=...",
                                      "concurrency=4 engine_version=a engine_flags=...",
                                      "concurrency=4 engine_version=b engine_flags=..."}));
  auto runs = m.matrix().getRuns();
  EXPECT_EQ(runs[1].getEngineVersion(), "b");
  ASSERT_EQ(runs[1].getEngineFlags().size(), 2u);
  EXPECT_EQ(runs[1].getEngineFlags()[0], "--y");
  EXPECT_EQ(runs[2].getEngineFlags()[0], "--x");
}

TEST(MatrixConditions, ZipGroupsOfUnequalLengthAreRefused) {
  LoadedMatrix m;
  Status s = Expand(R"(zip:
  - engine_version: [a, b]
    concurrency: [1, 2, 3]
)",
                    &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.yaml:7:18: expected zip key 'concurrency' to list 2 values (as 'engine_version' "
            "does), found 3");
  s = Expand("zip:\n  - concurency: [1]\n", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("m.yaml:6:5: unknown key 'concurency' in a zip group (did you mean "
                             "'concurrency'?)"),
            std::string::npos)
      << s.message();
}

TEST(MatrixConditions, WhereKeepsAndExcludeDropsRunsWithContiguousIndices) {
  LoadedMatrix m;
  ASSERT_TRUE(Expand(R"(cluster: {nodes: 1, gpus_per_node: 4}
axes:
  layout: [{tp: 1}, {tp: 2}, {tp: 4, pp: 2}]
  concurrency: [1, 8]
where: "tp * pp <= gpus_per_node * nodes"
exclude: ["tp == 1 and concurrency > 4"]
)",
                     &m)
                  .ok());
  EXPECT_EQ(Labels(m), (std::vector<std::string>{"tp=1 concurrency=1", "tp=2 concurrency=1",
                                                 "tp=2 concurrency=8"}));
  auto runs = m.matrix().getRuns();
  for (unsigned i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].getIndex(), i);
    EXPECT_NE(std::string(runs[i].getRunId()).find(fmt::format("t-{:04}-", i)), std::string::npos);
  }
}

TEST(MatrixConditions, BadConditionsNameFileLineAndColumn) {
  LoadedMatrix m;
  Status s = Expand("axes: {concurrency: [1]}\nwhere: \"tp <= gpu\"\n", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("m.yaml:6:8: in 'where' expression 'tp <= gpu': column 7: unknown "
                              "variable 'gpu'; variables: tp, pp,",
                              0),
            0u)
      << s.message();
  s = Expand("where: \"tp <=\"\n", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.yaml:5:8: in 'where' expression 'tp <=': column 6: expected a "
            "number, a string, a variable or '(', found the end");
  s = Expand("axes: {concurrency: [1, 2]}\nwhere: \"concurrency > 5\"\n", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.yaml: expected at least one run, found none left after "
            "'where'/'exclude' (2 combinations)");
}

// A zip group moves together: comparing one of its keys compares the whole group, so a
// self-hosted engine and a managed endpoint, each with its own layout and engine_config, are
// one comparison group per load point.
TEST(MatrixConditions, ComparingOneKeyOfAZipComparesTheWholeGroup) {
  LoadedMatrix m;
  ASSERT_TRUE(Expand(R"(zip:
  - engine: [sim, external]
    layout: [{tp: 4}, {tp: 1}]
    engine_config: [{max_num_seqs: 8}, {base_url: "http://127.0.0.1:1/v1"}]
axes:
  concurrency: [1, 8]
compare: [engine]
)",
                     &m)
                  .ok());
  auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 4u);
  for (auto run : runs) {
    EXPECT_EQ(run.getCompareGroup(),
              fmt::format("concurrency={}", run.getWorkload().getConcurrency()));
  }
}

TEST(MatrixConditions, CompareAxesAndBaseline) {
  LoadedMatrix m;
  ASSERT_TRUE(Expand(R"(axes:
  engine_version: [a, b]
  concurrency: [1, 8]
compare: [engine_version]
baseline: "engine_version == 'a'"
)",
                     &m)
                  .ok());
  ASSERT_EQ(m.matrix().getCompareAxes().size(), 1u);
  EXPECT_EQ(m.matrix().getCompareAxes()[0], "engine_version");
  auto runs = m.matrix().getRuns();
  EXPECT_EQ(runs[0].getCompareGroup(), "concurrency=1");
  EXPECT_EQ(runs[2].getCompareGroup(), "concurrency=1");
  EXPECT_EQ(runs[3].getCompareGroup(), "concurrency=8");
  EXPECT_TRUE(runs[0].getBaseline());
  EXPECT_TRUE(runs[1].getBaseline());
  EXPECT_FALSE(runs[2].getBaseline());
  EXPECT_FALSE(runs[3].getBaseline());

  // The baseline does not enter the run id: moving it re-runs nothing.
  LoadedMatrix other;
  ASSERT_TRUE(Expand(R"(axes:
  engine_version: [a, b]
  concurrency: [1, 8]
compare: [engine_version]
baseline: "engine_version == 'b'"
)",
                     &other)
                  .ok());
  EXPECT_EQ(std::string(other.matrix().getRuns()[0].getRunId()).substr(7),
            std::string(runs[0].getRunId()).substr(7));

  Status s = Expand("axes: {concurrency: [1]}\ncompare: [engine]\n", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.yaml:6:11: expected 'compare' to name an axis of this matrix "
            "(concurrency), found 'engine'");
  s = Expand("axes: {concurrency: [1]}\nbaseline: \"concurrency == 2\"\n", &m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.yaml: expected 'baseline' to select at least one run, found none");
}

TEST(MatrixSharedPrefix, GroupsShareTheirLeadingBlocks) {
  LoadedMatrix m;
  ASSERT_TRUE(ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload: {input_len: 1200, output_len: 5, num_requests: 6, concurrency: 2,
           shared_prefix: {groups: 2, prefix_len: 1000}}
)",
                           &m)
                  .ok());
  const auto plan = m.matrix().getRuns()[0].getWorkload().getPlan();
  ASSERT_EQ(plan.size(), 6u);
  for (unsigned i = 0; i < 6; ++i) {
    EXPECT_EQ(plan[i].getInputLenTok(), 1200u);
    EXPECT_EQ(plan[i].getPrefixLenTok(), 1000u);
    ASSERT_EQ(plan[i].getPrefixBlocks().size(), 2u);  // 1000 tokens: blocks 0 and 1 (partial)
  }
  EXPECT_EQ(plan[0].getPrefixBlocks()[0], plan[2].getPrefixBlocks()[0]);  // group 0
  EXPECT_EQ(plan[0].getPrefixBlocks()[1], plan[4].getPrefixBlocks()[1]);
  EXPECT_NE(plan[0].getPrefixBlocks()[0], plan[1].getPrefixBlocks()[0]);  // group 1
  EXPECT_EQ(plan[1].getPrefixBlocks()[0], plan[5].getPrefixBlocks()[0]);
  EXPECT_FALSE(m.matrix().getRuns()[0].getWorkload().getReplayArrivals());

  Status s = ExpandMatrix("m.yaml",
                          "name: t\nengine: sim\nmodel: m\n"
                          "workload: {input_len: 10, output_len: 5, num_requests: 3, "
                          "shared_prefix: {groups: 2}}\n",
                          &m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expected 'shared_prefix: {groups: G, prefix_len: TOKENS}'"),
            std::string::npos)
      << s.message();
}

TEST(MatrixSharedPrefix, MooncakeHashIdsBecomePrefixBlocks) {
  LoadedMatrix m;
  const Status s = ExpandMatrix(SERVESWEEP_SOURCE_DIR "/tests/data/m.yaml", R"(name: t
engine: sim
model: m
workload: {trace: mooncake_conversation_sample.jsonl, num_requests: 3, max_in_flight: 1}
)",
                                &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto plan = m.matrix().getRuns()[0].getWorkload().getPlan();
  ASSERT_EQ(plan.size(), 3u);
  // {"input_length": 6758, "hash_ids": [0, 1, ..., 13]}: 14 blocks cover all 6758 tokens.
  ASSERT_EQ(plan[0].getPrefixBlocks().size(), 14u);
  EXPECT_EQ(plan[0].getPrefixBlocks()[0], 0u);
  EXPECT_EQ(plan[0].getPrefixBlocks()[13], 13u);
  EXPECT_EQ(plan[0].getPrefixLenTok(), 6758u);
  // The second request shares block 0 (id 0) and nothing after (14, 15, ...).
  EXPECT_EQ(plan[1].getPrefixBlocks()[0], 0u);
  EXPECT_EQ(plan[1].getPrefixBlocks()[1], 14u);
}

}  // namespace
}  // namespace servesweep::matrix
