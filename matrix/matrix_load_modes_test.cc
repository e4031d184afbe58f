// Load-mode keys of the matrix: read into the run spec and into the load generator's settings,
// and refused with file:line:column, expected/found and did-you-mean when wrong.
#include <capnp/message.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "matrix/matrix_loader.h"
#include "workload/load_settings.h"

namespace servesweep::matrix {
namespace {

const char* kHead = "name: t\nengine: sim\nmodel: m\n";

Status Expand(const std::string& workload, LoadedMatrix* m, const std::string& path = "m.yaml") {
  return ExpandMatrix(path, std::string(kHead) + "workload: " + workload + "\n", m);
}

TEST(MatrixLoadModes, ClientThreadsReachTheLoadGenerator) {
  LoadedMatrix m;
  Status s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 4, concurrency: 8, "
      "client_threads: 2}",
      &m);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(workload::LoadSettingsFor(m.matrix().getRuns()[0], "http://x").threads, 2u);
  LoadedMatrix bad;
  s = Expand("{input_len: 8, output_len: 4, num_requests: 4, client_threads: 0}", &bad);
  EXPECT_NE(s.message().find("m.yaml:4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("expected 'client_threads' to be an integer >= 1, found 0"),
            std::string::npos)
      << s.message();
  s = Expand("{input_len: 8, output_len: 4, num_requests: 4, client_threads: 65}", &bad);
  EXPECT_NE(s.message().find("expected 'client_threads' from 1 to 64, found 65"), std::string::npos)
      << s.message();
}

TEST(MatrixLoadModes, BadKeysNamePlaceAndSuggestion) {
  LoadedMatrix bad;
  Status s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, request_rate: 5, "
      "arival: constant}",
      &bad);
  EXPECT_NE(s.message().find("m.yaml:4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did you mean 'arrival'"), std::string::npos) << s.message();
  s = Expand("{input_len: 8, output_len: 4, num_requests: 2, request_rate: 5, arrival: uniform}",
             &bad);
  EXPECT_NE(s.message().find("expected 'arrival' to be poisson or constant"), std::string::npos)
      << s.message();
  s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, "
      "ramp: {kind: linear, start_rate: 1, end_rat: 3}}",
      &bad);
  EXPECT_NE(s.message().find("did you mean 'end_rate'"), std::string::npos) << s.message();
  s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, "
      "ramp: {kind: cubic, start_rate: 1, end_rate: 3}}",
      &bad);
  EXPECT_NE(s.message().find("expected 'ramp.kind' to be linear or exponential, found 'cubic'"),
            std::string::npos)
      << s.message();
}

TEST(MatrixLoadModes, CustomPromptsAreReadWithTheirFileLine) {
  const auto dir = std::filesystem::temp_directory_path() / "servesweep_prompts_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "good.jsonl")
      << "{\"prompt\": \"a b c\", \"max_tokens\": 4}\n"
         "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n";
  std::ofstream(dir / "bad.jsonl")
      << "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"max_tokens\": -1}\n";
  const std::string matrix = (dir / "m.yaml").string();
  LoadedMatrix m;
  Status s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, concurrency: 1, "
      "prompts: jsonl:good.jsonl}",
      &m, matrix);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto settings = workload::LoadSettingsFor(m.matrix().getRuns()[0], "http://x");
  ASSERT_EQ(settings.custom_prompts.size(), 2u);
  EXPECT_EQ(settings.custom_prompts[0].prompt, "a b c");
  EXPECT_EQ(settings.custom_prompts[0].max_tokens, 4u);
  EXPECT_EQ(settings.custom_prompts[1].messages_json, R"([{"content":"hi","role":"user"}])");
  LoadedMatrix bad;
  s = Expand(
      "{input_len: 8, output_len: 4, num_requests: 2, concurrency: 1, "
      "prompts: jsonl:bad.jsonl}",
      &bad, matrix);
  EXPECT_NE(s.message().find(matrix + ":4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad.jsonl:2: expected \"max_tokens\" to be a positive integer, "
                             "found -1"),
            std::string::npos)
      << s.message();
  s = Expand("{input_len: 8, output_len: 4, num_requests: 2, concurrency: 1, prompts: bad.jsonl}",
             &bad, matrix);
  EXPECT_NE(s.message().find("expected 'prompts: jsonl:<file>', found 'bad.jsonl'"),
            std::string::npos)
      << s.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace servesweep::matrix

namespace servesweep::matrix {
namespace {

// One rule in one place: what the load generator refuses, `plan` refuses first, at the key's line.
TEST(MatrixLoadModes, SessionsWithTokenIdPromptsAreRefusedWhereTheyAreWritten) {
  LoadedMatrix m;
  const Status s = ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload:
  input_len: 8
  output_len: 4
  concurrency: 2
  prompt: token_ids
  sessions: {count: 2, turns: 2}
)",
                                &m);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "m.yaml:9:13: expected 'sessions' closed loop on synthetic text prompts (no trace, "
            "length distributions, shared_prefix, prompts, 'prompt: token_ids', request_rate or "
            "ramp), found 'prompt: token_ids'");
  // The same settings, handed to the load settings' own check, break the same rule.
  std::string key;
  workload::LoadSettings settings;
  settings.base_url = "http://x";
  settings.sessions = 2;
  settings.turns = 2;
  settings.token_id_prompts = true;
  EXPECT_EQ(workload::ValidateLoadSettings(settings, &key).message(),
            s.message().substr(s.message().find("expected")));
  EXPECT_EQ(key, "sessions");
}

// A path in a matrix is read against the matrix's folder, wherever `servesweep` runs from.
TEST(MatrixLoadModes, ProfilePathsResolveAgainstTheMatrixFile) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("servesweep-paths-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "profiles");
  std::filesystem::copy_file(SERVESWEEP_SOURCE_DIR "/profiles/models/llama-3.1-8b.yaml",
                             dir / "profiles" / "mine.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  LoadedMatrix m;
  const Status s = ExpandMatrix((dir / "m.yaml").string(), R"(name: t
engine: sim
model: m
sim: {hardware: h200, model_profile: profiles/mine.yaml}
workload: {input_len: 8, output_len: 4, num_requests: 2, concurrency: 1}
)",
                                &m);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(std::string(m.matrix().getRuns()[0].getSim().getModelProfile()),
            (dir / "profiles" / "mine.yaml").string());
  std::filesystem::remove_all(dir);
}

TEST(MatrixLoadModes, LoadModesExampleExpands) {
  LoadedMatrix m;
  Status s = LoadMatrixFile(SERVESWEEP_SOURCE_DIR "/examples/load-modes.yaml", &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto runs = m.matrix().getRuns();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].getWorkload().getDurationS(), 20);
  EXPECT_EQ(runs[1].getWorkload().getRamp(), "linear");
  EXPECT_EQ(runs[2].getWorkload().getNumRequests(), 64u);
  EXPECT_EQ(runs[3].getWorkload().getCustomPrompts().size(), 3u);
}

}  // namespace
}  // namespace servesweep::matrix
