// Custom JSONL prompts: both line shapes, per-line output lengths, and every bad line named by
// file:line with what was expected and what was found.
#include "workload/custom_prompts.h"

#include <gtest/gtest.h>

namespace servesweep::workload {
namespace {

std::string ErrorOf(const std::string& text) {
  std::vector<CustomPromptLine> lines;
  const Status s = ParseCustomPrompts(text, "p.jsonl", &lines);
  EXPECT_FALSE(s.ok());
  return s.message();
}

TEST(CustomPrompts, ReadsPromptsAndMessagesWithTheirLengths) {
  std::vector<CustomPromptLine> lines;
  const Status s = ParseCustomPrompts(
      "{\"prompt\": \"hello there\", \"max_tokens\": 12}\r\n"
      "   \n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \"x\"}, {\"role\": \"user\", "
      "\"content\": [{\"type\": \"text\", \"text\": \"y\"}]}], \"output_len\": 3}\n"
      "{\"prompt\": \"no length\"}",
      "p.jsonl", &lines);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].prompt, "hello there");
  EXPECT_EQ(lines[0].max_tokens, 12u);
  EXPECT_TRUE(lines[0].messages_json.empty());
  EXPECT_EQ(
      lines[1].messages_json,
      R"([{"content":"x","role":"system"},{"content":[{"text":"y","type":"text"}],"role":"user"}])");
  EXPECT_EQ(lines[1].max_tokens, 3u);
  EXPECT_EQ(lines[2].max_tokens, 0u);
}

TEST(CustomPrompts, BadLinesNameFileLineExpectedAndFound) {
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\"}\n{oops\n"),
            "p.jsonl:2: expected a JSON object, found text that is not JSON");
  EXPECT_EQ(ErrorOf("[1]\n"), "p.jsonl:1: expected a JSON object, found array");
  EXPECT_EQ(ErrorOf("{\"max_tokens\": 3}\n"),
            "p.jsonl:1: expected \"prompt\" (text) or \"messages\" (a chat array), found neither");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\", \"messages\": []}\n"),
            "p.jsonl:1: expected either \"prompt\" or \"messages\", found both");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\", \"max_token\": 3}\n"),
            "p.jsonl:1: unknown key \"max_token\"; expected prompt, messages, max_tokens or "
            "output_len");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"\"}\n"),
            "p.jsonl:1: expected \"prompt\" to be a non-empty string, found \"\"");
  EXPECT_EQ(ErrorOf("{\"messages\": []}\n"),
            "p.jsonl:1: expected \"messages\" to be a non-empty array, found []");
  EXPECT_EQ(ErrorOf("{\"messages\": [{\"role\": \"user\"}]}\n"),
            "p.jsonl:1: expected messages[0] to be {\"role\": string, \"content\": string or "
            "array}, found {\"role\":\"user\"}");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\", \"max_tokens\": 2.5}\n"),
            "p.jsonl:1: expected \"max_tokens\" to be a positive integer, found 2.5");
  EXPECT_EQ(ErrorOf("\n\n"), "p.jsonl: expected at least one prompt line, found none");
}

TEST(CustomPrompts, SpecAndMissingFile) {
  std::string path;
  EXPECT_TRUE(ParsePromptsSpec("jsonl:a/b.jsonl", &path));
  EXPECT_EQ(path, "a/b.jsonl");
  EXPECT_FALSE(ParsePromptsSpec("jsonl:", &path));
  EXPECT_FALSE(ParsePromptsSpec("b.jsonl", &path));
  std::vector<CustomPromptLine> lines;
  EXPECT_EQ(ReadCustomPrompts("/nonexistent/p.jsonl", &lines).message(),
            "/nonexistent/p.jsonl: cannot open the prompts file");
}

}  // namespace
}  // namespace servesweep::workload
