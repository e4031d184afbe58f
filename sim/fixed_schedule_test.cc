// Unit tests of the fixed-schedule timing core: event times, multi-token chunks, cancellation
// and the engine snapshot.
#include "sim/fixed_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace servesweep::sim {
namespace {

class Recorder : public TokenSink {
 public:
  void OnEvent(const TokenEvent& event) override { events.push_back(event); }
  std::vector<TokenEvent> events;
};

EngineRequest Request(uint64_t id, int64_t arrival_ns, int64_t prompt_tok, int64_t max_tok) {
  return {.id = id,
          .arrival_ns = arrival_ns,
          .prompt_tok = prompt_tok,
          .max_tok = max_tok,
          .prefix_block_hashes = {}};
}

TEST(FixedScheduleCoreTest, TokensFollowArrivalPlusTtftPlusKItl) {
  FixedScheduleCore core(
      {.ttft_ns = 100, .itl_ns = 10, .tokens_per_chunk = 1, .kv_capacity_tok = 1000});
  EXPECT_EQ(core.NextEventNs(), kNever);
  core.Submit(Request(7, 1000, 5, 3));
  EXPECT_EQ(core.NextEventNs(), 1100);
  Recorder sink;
  core.AdvanceTo(1099, sink);
  EXPECT_TRUE(sink.events.empty());
  // A late call emits everything due, at the schedule's instants.
  core.AdvanceTo(1200, sink);
  ASSERT_EQ(sink.events.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(sink.events[k].id, 7u);
    EXPECT_EQ(sink.events[k].time_ns, 1100 + 10 * k);
    EXPECT_EQ(sink.events[k].tokens, 1);
    EXPECT_EQ(sink.events[k].finished, k == 2);
  }
  EXPECT_EQ(core.NextEventNs(), kNever);
  const EngineSnapshot s = core.Snapshot();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_used_tok, 0);
  EXPECT_EQ(s.prefix_cache_queries_tok, 5);
}

TEST(FixedScheduleCoreTest, MultiTokenChunksCarryTheRemainderLast) {
  FixedScheduleCore core(
      {.ttft_ns = 0, .itl_ns = 10, .tokens_per_chunk = 3, .kv_capacity_tok = 1000});
  core.Submit(Request(1, 0, 2, 7));
  Recorder sink;
  core.AdvanceTo(1000, sink);
  ASSERT_EQ(sink.events.size(), 3u);
  EXPECT_EQ(sink.events[0].tokens, 3);
  EXPECT_EQ(sink.events[1].tokens, 3);
  EXPECT_EQ(sink.events[2].tokens, 1);
  EXPECT_EQ(sink.events[2].time_ns, 20);
  EXPECT_TRUE(sink.events[2].finished);
}

TEST(FixedScheduleCoreTest, SnapshotCountsRunningAndKvAndCancelReleases) {
  FixedScheduleCore core(
      {.ttft_ns = 0, .itl_ns = 10, .tokens_per_chunk = 1, .kv_capacity_tok = 1000});
  core.Submit(Request(1, 0, 4, 100));
  core.Submit(Request(2, 5, 6, 100));
  Recorder sink;
  core.AdvanceTo(15, sink);  // request 1: tokens at 0 and 10; request 2: at 5 and 15
  ASSERT_EQ(sink.events.size(), 4u);
  EXPECT_EQ(sink.events[0].id, 1u);  // time order across requests
  EXPECT_EQ(sink.events[1].id, 2u);
  EngineSnapshot s = core.Snapshot();
  EXPECT_EQ(s.running, 2);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_used_tok, 4 + 6 + 4);
  EXPECT_EQ(s.kv_capacity_tok, 1000);
  core.Cancel(1, 16);
  s = core.Snapshot();
  EXPECT_EQ(s.running, 1);
  EXPECT_EQ(s.kv_used_tok, 6 + 2);
  sink.events.clear();
  core.AdvanceTo(35, sink);
  for (const TokenEvent& e : sink.events) EXPECT_EQ(e.id, 2u);  // nothing for the cancelled one
  EXPECT_EQ(sink.events.size(), 2u);
}

}  // namespace
}  // namespace servesweep::sim
