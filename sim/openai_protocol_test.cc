// The request parser's fast path must answer exactly as the JSON DOM path does whenever it
// answers: checked on hand-written bodies and on many random mutations of them.
#include "sim/openai_protocol.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace servesweep::sim {
namespace {

std::string Describe(const std::variant<CompletionRequest, ErrorReply>& r) {
  if (const auto* e = std::get_if<ErrorReply>(&r)) return "error " + std::to_string(e->status);
  const auto& c = std::get<CompletionRequest>(r);
  return "ok prompt=" + std::to_string(c.prompt_tok) + " max=" + std::to_string(c.max_tok) +
         " stream=" + std::to_string(c.stream) + " usage=" + std::to_string(c.include_usage) +
         (c.question ? " question=" + std::to_string(c.question->a) + c.question->op +
                           std::to_string(c.question->b)
                     : std::string());
}

// The DOM path alone: ParseCompletionRequest on the body with one more, ignored, field whose
// name has a \u escape, which the fast path always refuses.
std::variant<CompletionRequest, ErrorReply> DomParse(Api api, const std::string& body,
                                                     int64_t max_model_len) {
  // A leading ignorable field with a \u escape makes the fast path refuse; the DOM ignores it.
  std::string forced = body;
  const size_t brace = forced.find_first_not_of(" \t\r\n");
  if (brace != std::string::npos && forced[brace] == '{') {
    const size_t next = forced.find_first_not_of(" \t\r\n", brace + 1);
    const bool empty = next != std::string::npos && forced[next] == '}';
    forced.insert(brace + 1, empty ? "\"zz\\u0041\":0" : "\"zz\\u0041\":0,");
  }
  return ParseCompletionRequest(api, forced, "m", max_model_len);
}

const std::vector<std::pair<Api, std::string>>& Corpus() {
  static const std::vector<std::pair<Api, std::string>> corpus = {
      {Api::kCompletions,
       R"({"model":"m","prompt":"hello big world","max_tokens":4,"stream":true,"stream_options":{"include_usage":true},"temperature":0.0})"},
      {Api::kCompletions, R"({"prompt":[1,2,3,-4],"max_tokens":null,"stream":false})"},
      {Api::kCompletions, R"({"prompt":["a b\nc\td"],"model":null})"},
      {Api::kCompletions, R"( { "prompt" : [[5, 6]] , "max_tokens" : 2 } )"},
      {Api::kCompletions,
       R"({"prompt":"x\\y \"q\" \/ \b z","ignore_eos":true,"logit_bias":{"1":[1.5e3,{"a":null}]}})"},
      {Api::kCompletions, R"({"prompt":[],"max_completion_tokens":3})"},
      {Api::kChat,
       R"({"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"three more words"},{"role":"user","content":[]}],"max_completion_tokens":5,"max_tokens":9})"},
      {Api::kChat,
       R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":7,"stream_options":null})"},
      {Api::kChat, R"({"messages":[{}],"stream":true})"},
      {Api::kCompletions,
       R"({"model":"m","prompt":"Question: What is 37 + 58? Reply with the number only.\nAnswer:","max_tokens":16,"temperature":0,"stream":false})"},
      {Api::kChat,
       R"({"messages":[{"role":"user","content":"Question: What is 12 * 7? Reply with the number only.\nAnswer:"}],"max_tokens":8})"},
  };
  return corpus;
}

TEST(FastParseTest, AnswersTheUsualShapesAsTheDomDoes) {
  for (const auto& [api, body] : Corpus()) {
    const auto fast = FastParseCompletionRequest(api, body, "m", 131072);
    ASSERT_TRUE(fast.has_value()) << body;
    EXPECT_EQ(Describe(*fast), Describe(DomParse(api, body, 131072))) << body;
  }
}

// LoRA adapters are served as models of their own (as vLLM serves them): both paths name the
// adapter a request chose, the base model is -1, and a name served by neither is vLLM's 404.
TEST(FastParseTest, AdapterNamesAreServedAsModelsOnBothPaths) {
  const std::vector<std::string> adapters = {"sql", "chat"};
  for (const Api api : {Api::kCompletions, Api::kChat}) {
    const std::string rest =
        api == Api::kChat ? R"("messages":[{"role":"user","content":"hi"}]})" : R"("prompt":"hi"})";
    for (const auto& [model, adapter] :
         std::vector<std::pair<std::string, int32_t>>{{"m", -1}, {"sql", 0}, {"chat", 1}}) {
      const std::string body = R"({"model":")" + model + R"(",)" + rest;
      const auto fast = FastParseCompletionRequest(api, body, "m", 131072, adapters);
      ASSERT_TRUE(fast.has_value()) << body;
      EXPECT_EQ(fast->adapter, adapter) << body;
      const auto dom =
          ParseCompletionRequest(api, R"({"zz\u0041":0,)" + body.substr(1), "m", 131072, adapters);
      ASSERT_TRUE(std::holds_alternative<CompletionRequest>(dom)) << body;
      EXPECT_EQ(std::get<CompletionRequest>(dom).adapter, adapter) << body;
    }
    const std::string unknown = R"({"model":"code",)" + rest;
    EXPECT_FALSE(FastParseCompletionRequest(api, unknown, "m", 131072, adapters).has_value());
    const auto refused = ParseCompletionRequest(api, unknown, "m", 131072, adapters);
    ASSERT_TRUE(std::holds_alternative<ErrorReply>(refused));
    EXPECT_EQ(std::get<ErrorReply>(refused).status, 404u);
    EXPECT_NE(std::get<ErrorReply>(refused).body.find("The model `code` does not exist."),
              std::string::npos);
  }
}

TEST(FastParseTest, RefusesWhatOnlyTheDomDecides) {
  const std::vector<std::string> refused = {
      R"({"prompt":"a","model":"other"})",   // 404
      R"({"prompt":"a","max_tokens":0})",    // 400
      R"({"prompt":"a","max_tokens":1.0})",  // not an integer
      R"({"prompt":"\u0041 b"})",            // \u escape
      R"({"prompt":"a","prompt":"b c"})",    // duplicate
      R"({"prompt":"a"} x)",                 // trailing bytes
      R"({"prompt":"a",})",                  // malformed
      R"({"prompt":["a","b"]})",             // batch
      "{\"prompt\":\"caf\xc3\xa9\"}",        // non-ASCII
  };
  for (const std::string& body : refused) {
    EXPECT_FALSE(FastParseCompletionRequest(Api::kCompletions, body, "m", 131072).has_value())
        << body;
  }
  EXPECT_FALSE(
      FastParseCompletionRequest(Api::kCompletions, R"({"prompt":"a b","max_tokens":9})", "m", 10)
          .has_value());  // over max_model_len: the DOM path words the error
}

TEST(FastParseTest, RandomMutationsNeverDisagreeWithTheDom) {
  std::mt19937_64 rng(42);
  const std::string alphabet = "{}[]\",:0123456789-.eE \\ntfalsenull\"prompt\"\"max_tokens\"ab";
  int decided = 0;
  for (int round = 0; round < 20000; ++round) {
    const auto& [api, seed_body] = Corpus()[rng() % Corpus().size()];
    std::string body = seed_body;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const size_t at = rng() % body.size();
      switch (rng() % 3) {
        case 0:
          body.erase(at, 1);
          break;
        case 1:
          body.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          body[at] = alphabet[rng() % alphabet.size()];
          break;
      }
    }
    const auto fast = FastParseCompletionRequest(api, body, "m", 131072);
    if (!fast) continue;
    ++decided;
    ASSERT_EQ(Describe(*fast), Describe(DomParse(api, body, 131072))) << body;
  }
  EXPECT_GT(decided, 1000);  // the mutations exercise the fast path, not only its refusals
}

TEST(PromptBlockHashes, ChainedOverFullBlocksOfWordsOrIds) {
  auto words = [](int n, int change_at = -1) {
    std::string out;
    for (int i = 0; i < n; ++i) out += (i ? " w" : "w") + std::to_string(i == change_at ? -1 : i);
    return out;
  };
  const std::string body_a = R"({"prompt":")" + words(10) + R"(","max_tokens":1})";
  const std::string body_b = R"({"prompt":")" + words(9) + R"( other","max_tokens":1})";
  const auto a = PromptBlockHashes(Api::kCompletions, body_a, 4);
  const auto b = PromptBlockHashes(Api::kCompletions, body_b, 4);
  ASSERT_EQ(a.size(), 2u);  // 10 tokens: two full blocks of 4, the partial third is not hashed
  EXPECT_EQ(a, b);          // they differ only in the partial block
  // A change in block 0 changes every later hash too (chained, as a prefix cache keys blocks).
  const std::string body_c = R"({"prompt":")" + words(10, 1) + R"(","max_tokens":1})";
  const auto c = PromptBlockHashes(Api::kCompletions, body_c, 4);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NE(c[0], a[0]);
  EXPECT_NE(c[1], a[1]);
  // Token ids and chat messages hash too; malformed bodies and block 0 give nothing.
  EXPECT_EQ(PromptBlockHashes(Api::kCompletions, R"({"prompt":[1,2,3,4,5]})", 2).size(), 2u);
  EXPECT_EQ(
      PromptBlockHashes(Api::kChat,
                        R"({"messages":[{"role":"user","content":")" + words(10) + R"("}]})", 4),
      a);
  EXPECT_TRUE(PromptBlockHashes(Api::kCompletions, "{not json", 4).empty());
  EXPECT_TRUE(PromptBlockHashes(Api::kCompletions, body_a, 0).empty());
}

TEST(ArithmeticAnswers, FindsTheQuestionAndAnswersWithTheSeededAccuracy) {
  const auto q = FindArithmeticQuestion("Question: What is 37 - 58? Reply with the number only.");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->a, 37);
  EXPECT_EQ(q->op, '-');
  EXPECT_EQ(q->b, 58);
  EXPECT_FALSE(FindArithmeticQuestion("What is the capital of France?").has_value());
  EXPECT_FALSE(FindArithmeticQuestion("What is 3 / 4?").has_value());
  EXPECT_EQ(AnswerArithmetic(*q, 1.0, 1), "-21");
  EXPECT_NE(AnswerArithmetic(*q, 0.0, 1), "-21");

  // Over many questions the share answered correctly is close to the accuracy, and a question
  // is answered the same way every time (temperature 0).
  int correct = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    const ArithmeticQuestion question{i, '+', 3 * i + 1};
    const std::string answer = AnswerArithmetic(question, 0.5, 7);
    EXPECT_EQ(answer, AnswerArithmetic(question, 0.5, 7));
    correct += answer == std::to_string(4 * i + 1);
  }
  EXPECT_NEAR(static_cast<double>(correct) / n, 0.5, 0.05);

  // Both parsers find it; the reply's first token carries the answer.
  const auto parsed = ParseCompletionRequest(
      Api::kCompletions, R"({"prompt":"Question: What is 12 * 7? Reply.\nAnswer:","max_tokens":3})",
      "m", 1000);
  ASSERT_TRUE(std::get<CompletionRequest>(parsed).question.has_value());
  ResponseRenderer renderer(Api::kCompletions, 1, 0, "\"m\"");
  renderer.set_first_token_text(" 84");
  EXPECT_NE(renderer.RenderResponse(5, 3).find("\"text\":\" 84 t1 t2\""), std::string::npos);
  std::string events;
  renderer.AppendTokenEvent(events, 0, 2, false);
  EXPECT_NE(events.find("\"text\":\" 84 t1\""), std::string::npos) << events;
}

}  // namespace
}  // namespace servesweep::sim
