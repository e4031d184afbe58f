#include "cli/bench_options.h"

#include <gtest/gtest.h>

#include <memory>

#include "testing/scratch_dir.h"

namespace servesweep::cli {
namespace {

// `servesweep bench` parsed from `args` (after --url and --model) and resolved.
struct Parsed {
  std::unique_ptr<CLI::App> app = std::make_unique<CLI::App>("bench");
  BenchOptions options;
  Status resolved;
};

std::unique_ptr<Parsed> Parse(std::vector<std::string> args) {
  auto p = std::make_unique<Parsed>();
  AddBenchFlags(*p->app, &p->options);
  args.insert(args.begin(), {"--url", "http://127.0.0.1:1", "--model", "m"});
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  p->app->parse(args);
  p->resolved = ResolveBenchLoad(&p->options);
  return p;
}

TEST(BenchOptions, MaxConcurrencyIsAnOpenLoopsCapElseTheSlots) {
  auto open = Parse({"--rate", "5", "--max-concurrency", "8"});
  ASSERT_TRUE(open->resolved.ok()) << open->resolved.message();
  EXPECT_EQ(open->options.load.max_in_flight, 8u);
  EXPECT_EQ(open->options.load.concurrency, 0u);
  EXPECT_EQ(open->options.load.request_rate_per_s, 5);

  auto closed = Parse({"--max-concurrency", "8"});
  ASSERT_TRUE(closed->resolved.ok()) << closed->resolved.message();
  EXPECT_EQ(closed->options.load.concurrency, 8u);
  EXPECT_EQ(closed->options.load.max_in_flight, 0u);

  // A ramp is an open loop too.
  auto ramp = Parse({"--ramp", "linear", "--ramp-start-rate", "1", "--ramp-end-rate", "10",
                     "--max-concurrency", "3"});
  ASSERT_TRUE(ramp->resolved.ok()) << ramp->resolved.message();
  EXPECT_EQ(ramp->options.load.ramp, loadgen::RampKind::kLinear);
  EXPECT_EQ(ramp->options.load.max_in_flight, 3u);
  EXPECT_EQ(ramp->options.load.concurrency, 0u);
}

TEST(BenchOptions, AnOpenLoopOrSessionsWithoutSlotsHaveNone) {
  auto open = Parse({"--rate", "5"});
  ASSERT_TRUE(open->resolved.ok());
  EXPECT_EQ(open->options.load.concurrency, 0u);
  auto sessions = Parse({"--sessions", "10", "--turns", "3"});
  ASSERT_TRUE(sessions->resolved.ok());
  EXPECT_EQ(sessions->options.load.concurrency, 0u);
  EXPECT_EQ(sessions->options.load.sessions, 10u);
  // Slots given with an open loop stay: a rate into at most that many slots.
  auto both = Parse({"--rate", "5", "--concurrency", "4"});
  ASSERT_TRUE(both->resolved.ok());
  EXPECT_EQ(both->options.load.concurrency, 4u);
}

TEST(BenchOptions, NoLoopIsRefusedWithTheWaysToAskForOne) {
  auto none = Parse({});
  EXPECT_EQ(none->resolved.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none->resolved.message(),
            "expected --concurrency C (closed loop), --rate R or --ramp (open loop), or "
            "--sessions, found none");
  // --max-concurrency is the slots or the cap, never beside them.
  EXPECT_THROW(Parse({"--max-concurrency", "4", "--concurrency", "2"}), CLI::ExcludesError);
}

TEST(BenchOptions, NamesBecomeTheLoadGeneratorsKinds) {
  auto p = Parse({"--rate", "5", "--arrival", "constant", "--api", "chat", "--compat", "vllm",
                  "--sessions", "2", "--think-time", "exponential"});
  ASSERT_TRUE(p->resolved.ok()) << p->resolved.message();
  EXPECT_EQ(p->options.load.arrival, loadgen::ArrivalKind::kConstant);
  EXPECT_EQ(p->options.load.api, loadgen::Api::kChatCompletions);
  EXPECT_TRUE(p->options.load.vllm_view);
  EXPECT_TRUE(p->options.load.think_time_exponential);
  auto plain = Parse({"--concurrency", "1"});
  EXPECT_EQ(plain->options.load.arrival, loadgen::ArrivalKind::kPoisson);
  EXPECT_EQ(plain->options.load.api, loadgen::Api::kCompletions);
  EXPECT_FALSE(plain->options.load.vllm_view);
}

TEST(BenchOptions, CustomPromptsAreReadAndABadSpecIsRefused) {
  testing::ScratchDir dir("bench_options");
  const std::string file =
      dir.WriteFile("p.jsonl", "{\"prompt\": \"hello\", \"max_tokens\": 7}\n{\"prompt\": \"b\"}\n");
  auto p = Parse({"--concurrency", "1", "--prompts", "jsonl:" + file});
  ASSERT_TRUE(p->resolved.ok()) << p->resolved.message();
  ASSERT_EQ(p->options.load.custom_prompts.size(), 2u);
  EXPECT_EQ(p->options.load.custom_prompts[0].prompt, "hello");
  EXPECT_EQ(p->options.load.custom_prompts[0].max_tokens, 7u);
  auto bad = Parse({"--concurrency", "1", "--prompts", file});
  EXPECT_EQ(bad->resolved.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad->resolved.message(), "expected --prompts jsonl:<file>, found '" + file + "'");
  auto missing = Parse({"--concurrency", "1", "--api-key-file", dir.Path("no-key")});
  EXPECT_FALSE(missing->resolved.ok());
  EXPECT_NE(missing->resolved.message().find("--api-key-file"), std::string::npos)
      << missing->resolved.message();
}

}  // namespace
}  // namespace servesweep::cli
