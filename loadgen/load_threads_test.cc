// Several load threads (LoadSettings::threads) against the in-test SSE server: each request goes
// out exactly once, the concurrency is shared, schedules and session order hold.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <stdexcept>

#include "loadgen/arrival_schedule.h"
#include "loadgen/load_generator.h"
#include "testing/test_sse_server.h"

namespace servesweep::loadgen {
namespace {

using testing::TestSseServer;

LoadSettings Settings(const TestSseServer& server, uint32_t threads) {
  LoadSettings s;
  s.base_url = server.base_url();
  s.model = "ok";
  s.input_len_tok = 16;
  s.output_len_tok = 5;
  s.seed = 3;
  s.request_timeout_s = 10;
  s.threads = threads;
  return s;
}

TEST(LoadThreads, ClosedLoopSharesTheConcurrencyAndSendsEachRequestOnce) {
  TestSseServer server;
  LoadSettings s = Settings(server, 2);
  s.num_requests = 60;
  s.concurrency = 4;
  std::atomic<int> reporting{0};
  std::atomic<bool> overlapped{false};
  uint32_t last_completed = 0;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res, [&](const Progress& p) {
                if (reporting.fetch_add(1) != 0) overlapped = true;  // one call at a time
                last_completed = p.completed;
                reporting.fetch_sub(1);
              }).ok());
  ASSERT_EQ(res.requests.size(), 60u);
  for (uint32_t i = 0; i < res.requests.size(); ++i) {
    EXPECT_EQ(res.requests[i].index, i);  // in the order handed out, each once
    EXPECT_TRUE(res.requests[i].success) << res.requests[i].error;
  }
  EXPECT_EQ(server.requests(), 60);
  EXPECT_LE(server.max_in_flight(), 4);  // two threads of two slots
  EXPECT_EQ(server.connections(), 4);    // each thread keeps its two connections alive
  std::set<std::string> prompts;
  for (const auto& p : server.prompts()) prompts.insert(p);
  EXPECT_EQ(prompts.size(), 60u);
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(last_completed, 60u);  // the sum over the threads
}

TEST(LoadThreads, OpenLoopKeepsTheAbsoluteSchedule) {
  TestSseServer server(200);
  LoadSettings s = Settings(server, 3);
  s.num_requests = 30;
  s.request_rate_per_s = 300;
  s.concurrency = 0;  // uncapped: every thread takes what is due
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  const auto schedule = PoissonScheduleNs(30, 300, s.seed);
  ASSERT_EQ(res.requests.size(), 30u);
  for (uint32_t i = 0; i < 30; ++i) {
    EXPECT_EQ(res.requests[i].index, i);
    EXPECT_EQ(res.requests[i].scheduled_ns, schedule[i]);
    EXPECT_TRUE(res.requests[i].success) << res.requests[i].error;
  }
  EXPECT_EQ(server.requests(), 30);
}

TEST(LoadThreads, SessionTurnsStayInOrderAcrossThreads) {
  TestSseServer server;
  LoadSettings s = Settings(server, 2);
  s.api = Api::kChatCompletions;
  s.sessions = 4;
  s.turns = 3;
  s.concurrency = 4;
  s.think_time_s = 0.005;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  ASSERT_EQ(res.requests.size(), 12u);
  std::map<int32_t, std::vector<const RequestRecord*>> by_session;
  for (const auto& r : res.requests) {
    EXPECT_TRUE(r.success) << r.error;
    by_session[r.session_id].push_back(&r);
  }
  ASSERT_EQ(by_session.size(), 4u);
  for (const auto& [session, turns] : by_session) {
    ASSERT_EQ(turns.size(), 3u) << "session " << session;
    for (int32_t k = 0; k < 3; ++k) {
      EXPECT_EQ(turns[k]->turn, k);
      // The next turn goes out after the previous one ended and the think time passed.
      if (k > 0) {
        EXPECT_GE(turns[k]->start_ns, turns[k - 1]->done_ns + 5'000'000);
      }
    }
  }
}

TEST(LoadThreads, AtMostOneThreadPerRequestInFlight) {
  LoadResult unused;
  TestSseServer server;
  LoadSettings s = Settings(server, 4);
  s.num_requests = 8;
  s.concurrency = 1;
  LoadResult res;
  ASSERT_TRUE(RunLoad(s, &res).ok());
  EXPECT_EQ(res.requests.size(), 8u);
  EXPECT_EQ(server.max_in_flight(), 1);  // not four threads of an unlimited share
  EXPECT_EQ(server.connections(), 1);
  s.threads = 0;
  EXPECT_EQ(RunLoad(s, &unused).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace servesweep::loadgen
