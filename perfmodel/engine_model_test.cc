#include "perfmodel/engine_model.h"

#include <gtest/gtest.h>

#include <map>

namespace servesweep::perfmodel {
namespace {

struct Fixture {
  HardwareProfile hw;
  ModelProfile model;
};

Fixture Load(const std::string& gpu = "h100", const std::string& model = "llama-3.1-8b") {
  Fixture f;
  EXPECT_TRUE(LoadHardwareProfile(gpu, &f.hw).ok());
  EXPECT_TRUE(LoadModelProfile(model, &f.model).ok());
  return f;
}

std::unique_ptr<EngineModel> Engine(const DeploymentConfig& d = {}, const Fixture& f = Load()) {
  std::unique_ptr<EngineModel> engine;
  Status s = EngineModel::Create(f.hw, f.model, d, &engine);
  EXPECT_TRUE(s.ok()) << s.message();
  return engine;
}

// Llama 3.1 8B on an H100 with room for about `tokens` tokens of KV cache.
DeploymentConfig SmallKv(int64_t tokens) {
  DeploymentConfig d;
  d.gpu_memory_utilization = (1e9 + 8'029'995'008.0 * 2 + (tokens + 0.5) * 131072.0) / 80e9;
  return d;
}

RequestSpec Req(uint64_t id, int64_t arrival_ns, int32_t input, int32_t output,
                std::vector<uint64_t> hashes = {}) {
  return RequestSpec{id, arrival_ns, input, output, std::move(hashes)};
}

std::vector<Event> RunAll(EngineModel& engine) {
  std::vector<Event> events;
  while (engine.NextEventNs() != EngineModel::kNever) {
    engine.AdvanceTo(engine.NextEventNs(), [&](const Event& e) { events.push_back(e); });
  }
  return events;
}

std::vector<Event> Of(const std::vector<Event>& events, uint64_t id) {
  std::vector<Event> out;
  for (const Event& e : events) {
    if (e.id == id) out.push_back(e);
  }
  return out;
}

int64_t FirstTokenNs(const std::vector<Event>& events, uint64_t id) {
  for (const Event& e : events) {
    if (e.id == id && e.kind == EventKind::kFirstToken) return e.time_ns;
  }
  return -1;
}

// Largest gap between consecutive token chunks of one request.
int64_t MaxGapNs(const std::vector<Event>& events, uint64_t id) {
  int64_t last = -1, gap = 0;
  for (const Event& e : Of(events, id)) {
    if (e.kind != EventKind::kFirstToken && e.kind != EventKind::kTokens) continue;
    if (last >= 0) gap = std::max(gap, e.time_ns - last);
    last = e.time_ns;
  }
  return gap;
}

// Every request: first event kFirstToken, tokens add up to its output, kFinished last; all
// events in time order.
void ExpectWellFormed(const std::vector<Event>& events, const std::vector<RequestSpec>& reqs) {
  for (size_t i = 1; i < events.size(); ++i) {
    ASSERT_LE(events[i - 1].time_ns, events[i].time_ns) << "event " << i;
  }
  for (const RequestSpec& r : reqs) {
    int64_t tokens = 0;
    bool first = false, finished = false;
    for (const Event& e : Of(events, r.id)) {
      EXPECT_FALSE(finished) << "request " << r.id << " has events after kFinished";
      if (e.kind == EventKind::kFirstToken) {
        EXPECT_FALSE(first);
        EXPECT_EQ(tokens, 0);
        first = true;
      }
      if (e.kind == EventKind::kTokens) {
        EXPECT_TRUE(first);
      }
      tokens += e.tokens;
      if (e.kind == EventKind::kFinished) finished = true;
    }
    EXPECT_TRUE(finished) << "request " << r.id;
    EXPECT_EQ(tokens, r.output_tok) << "request " << r.id;
  }
}

TEST(EngineModelTest, OneRequestFollowsTheStepCosts) {
  auto engine = Engine();
  ASSERT_TRUE(engine->Submit(Req(7, 5'000, 1000, 4)).ok());
  EXPECT_EQ(engine->NextEventNs(), 5'000);
  const std::vector<Event> events = RunAll(*engine);
  const CostModel& c = engine->cost();
  const int64_t t1 = 5'000 + c.Step({{0, 1000, 1}}).total_ns;
  const int64_t t2 = t1 + c.Step({{1000, 1, 1}}).total_ns;
  const int64_t t3 = t2 + c.Step({{1001, 1, 1}}).total_ns;
  const int64_t t4 = t3 + c.Step({{1002, 1, 1}}).total_ns;
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].kind, EventKind::kFirstToken);
  EXPECT_EQ(events[0].time_ns, t1);
  EXPECT_EQ(events[0].tokens, 1);
  EXPECT_EQ(events[1].time_ns, t2);
  EXPECT_EQ(events[2].time_ns, t3);
  EXPECT_EQ(events[3].time_ns, t4);
  EXPECT_EQ(events[3].kind, EventKind::kTokens);
  EXPECT_EQ(events[4].kind, EventKind::kFinished);
  EXPECT_EQ(events[4].time_ns, t4);
  const EngineSnapshot s = engine->Snapshot();
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(s.prompt_tok, 1000);
  EXPECT_EQ(s.generation_tok, 4);
  EXPECT_EQ(s.finished, 1);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_usage, 0);  // its prompt blocks are cached but unreferenced: free for use
  EXPECT_EQ(engine->ColdStartNs(), c.ColdStartNs());
}

TEST(EngineModelTest, LongPromptsArePrefilledInChunksUnderTheTokenBudget) {
  auto engine = Engine();
  ASSERT_TRUE(engine->Submit(Req(1, 0, 20000, 1)).ok());
  const std::vector<Event> events = RunAll(*engine);
  const CostModel& c = engine->cost();
  EXPECT_EQ(FirstTokenNs(events, 1), c.Step({{0, 8192, 0}}).total_ns +
                                         c.Step({{8192, 8192, 0}}).total_ns +
                                         c.Step({{16384, 3616, 1}}).total_ns);
  EXPECT_EQ(engine->Snapshot().steps, 3);
}

TEST(EngineModelTest, RealTimeTicksGiveTheSameEventsAsVirtualTime) {
  std::vector<RequestSpec> reqs;
  for (uint64_t i = 0; i < 30; ++i) {
    reqs.push_back(Req(i, static_cast<int64_t>(i) * 7'300'000, 200 + 97 * (i % 7), 5 + i % 11));
  }
  auto virtual_engine = Engine();
  for (const auto& r : reqs) ASSERT_TRUE(virtual_engine->Submit(r).ok());
  const std::vector<Event> expected = RunAll(*virtual_engine);

  // An emulator's loop: every millisecond, submit what arrived and advance to now.
  auto realtime = Engine();
  std::vector<Event> got;
  size_t next = 0;
  for (int64_t now = 0; got.size() < expected.size(); now += 1'000'000) {
    while (next < reqs.size() && reqs[next].arrival_ns <= now) {
      ASSERT_TRUE(realtime->Submit(reqs[next++]).ok());
    }
    realtime->AdvanceTo(now, [&](const Event& e) { got.push_back(e); });
    ASSERT_LT(now, int64_t{100'000'000'000}) << "never finished";
  }
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, expected[i].id) << i;
    EXPECT_EQ(got[i].time_ns, expected[i].time_ns) << i;
    EXPECT_EQ(got[i].kind, expected[i].kind) << i;
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << i;
  }
  ExpectWellFormed(got, reqs);
}

TEST(EngineModelTest, AFullKvCacheKeepsRequestsWaiting) {
  auto engine = Engine(SmallKv(4000));
  const int64_t capacity = engine->Snapshot().kv_capacity_tok;
  ASSERT_NEAR(capacity, 4000, 1);
  // One output token each: the request that woke the engine is prefilled alone and done after
  // the first step; the second step fills the cache with the others.
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(engine->Submit(Req(i, 0, 1000, 1)).ok());
  engine->AdvanceTo(0, [](const Event&) {});
  EngineSnapshot s = engine->Snapshot();
  EXPECT_EQ(s.running, 1);
  engine->AdvanceTo(engine->NextEventNs(), [](const Event&) {});  // the second step has started
  s = engine->Snapshot();
  EXPECT_EQ(s.running, capacity / 1000);
  EXPECT_EQ(s.waiting, 10 - 1 - capacity / 1000);
  EXPECT_GT(s.kv_usage, 0.74);
  EXPECT_LE(s.kv_usage, 1.0);
}

TEST(EngineModelTest, RequestsThatCannotGrowArePreemptedNewestFirstAndRecomputed) {
  auto engine = Engine(SmallKv(4000));
  std::vector<RequestSpec> reqs;
  for (uint64_t i = 0; i < 6; ++i) reqs.push_back(Req(i, 0, 500, 800));
  for (const auto& r : reqs) ASSERT_TRUE(engine->Submit(r).ok());
  std::vector<Event> events;
  int32_t max_waiting = 0;
  while (engine->NextEventNs() != EngineModel::kNever) {
    engine->AdvanceTo(engine->NextEventNs(), [&](const Event& e) { events.push_back(e); });
    const EngineSnapshot s = engine->Snapshot();
    max_waiting = std::max(max_waiting, s.waiting);
    ASSERT_LE(s.kv_usage, 1.0);
  }
  ExpectWellFormed(events, reqs);
  int64_t preempted = 0;
  uint64_t first_victim = 99;
  for (const Event& e : events) {
    if (e.kind != EventKind::kPreempted) continue;
    if (preempted++ == 0) first_victim = e.id;
  }
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(engine->Snapshot().preemptions, preempted);
  EXPECT_EQ(first_victim, 5u);  // the newest request goes first
  EXPECT_GT(max_waiting, 0);
  // Recompute costs time: the same requests finish later than with room to spare.
  auto roomy = Engine();
  for (const auto& r : reqs) ASSERT_TRUE(roomy->Submit(r).ok());
  const std::vector<Event> unhindered = RunAll(*roomy);
  EXPECT_EQ(roomy->Snapshot().preemptions, 0);
  EXPECT_GT(events.back().time_ns, unhindered.back().time_ns);
}

TEST(EngineModelTest, CancelledRequestsStopAndFreeTheirCache) {
  for (bool pd : {false, true}) {
    DeploymentConfig d = SmallKv(4000);
    d.max_num_seqs = 2;
    if (pd) d.prefill_instances = d.decode_instances = 1;
    auto engine = Engine(d);
    for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(engine->Submit(Req(i, 0, 500, 100)).ok());
    ASSERT_TRUE(engine->Submit(Req(9, 1'000'000'000'000, 500, 100)).ok());  // far future
    std::vector<Event> events;
    const EventSink sink = [&](const Event& e) { events.push_back(e); };
    // Run until request 0 has its first token; then 0 is running and 3 is waiting.
    while (FirstTokenNs(events, 0) < 0) engine->AdvanceTo(engine->NextEventNs(), sink);
    const int64_t cancelled_at = engine->Snapshot().time_ns;
    EXPECT_TRUE(engine->Cancel(0));
    EXPECT_TRUE(engine->Cancel(3));
    EXPECT_TRUE(engine->Cancel(9));
    EXPECT_FALSE(engine->Cancel(3));   // already cancelled
    EXPECT_FALSE(engine->Cancel(42));  // unknown
    EXPECT_EQ(engine->Snapshot().cancelled, 3);
    const std::vector<Event> all = RunAll(*engine);
    events.insert(events.end(), all.begin(), all.end());
    for (const Event& e : events) {
      if (e.id == 0) {
        EXPECT_LE(e.time_ns, cancelled_at);
      }
      EXPECT_NE(e.id, 3u);
      EXPECT_NE(e.id, 9u);
    }
    ExpectWellFormed(events, {Req(1, 0, 500, 100), Req(2, 0, 500, 100)});
    const EngineSnapshot s = engine->Snapshot();
    EXPECT_EQ(s.running + s.waiting + s.transferring, 0);
    EXPECT_EQ(s.kv_usage, 0);
    EXPECT_LT(s.time_ns, 1'000'000'000'000);  // request 9 never ran
  }
}

TEST(EngineModelTest, ARequestThatCanNeverFitIsRejected) {
  auto engine = Engine(SmallKv(4000));
  ASSERT_TRUE(engine->Submit(Req(1, 0, 5000, 10)).ok());
  ASSERT_TRUE(engine->Submit(Req(2, 0, 100, 10)).ok());
  EXPECT_FALSE(engine->Submit(Req(2, 0, 100, 10)).ok());  // duplicate id
  EXPECT_FALSE(engine->Submit(Req(3, 0, 0, 10)).ok());
  const std::vector<Event> events = RunAll(*engine);
  ASSERT_EQ(Of(events, 1).size(), 1u);
  EXPECT_EQ(Of(events, 1)[0].kind, EventKind::kRejected);
  EXPECT_EQ(engine->Snapshot().rejected, 1);
  ExpectWellFormed(events, {Req(2, 0, 100, 10)});
}

// Request B shares A's first four 512-token blocks: it prefills only its last 100 tokens.
TEST(EngineModelTest, PrefixCacheHitsCutTimeToFirstToken) {
  const std::vector<uint64_t> hashes = {11, 12, 13, 14, 15};
  for (bool caching : {true, false}) {
    DeploymentConfig d;
    d.prefix_caching = caching;
    auto engine = Engine(d);
    ASSERT_TRUE(engine->Submit(Req(1, 0, 2148, 2, hashes)).ok());
    ASSERT_TRUE(engine->Submit(Req(2, 1'000'000'000, 2148, 2, hashes)).ok());
    ASSERT_TRUE(engine->Submit(Req(3, 2'000'000'000, 2148, 2, {99, 12, 13, 14})).ok());
    const std::vector<Event> events = RunAll(*engine);
    const CostModel& c = engine->cost();
    const int64_t cold = c.Step({{0, 2148, 1}}).total_ns;
    EXPECT_EQ(FirstTokenNs(events, 1), cold);
    EXPECT_EQ(FirstTokenNs(events, 3), 2'000'000'000 + cold);  // first block differs: no hit
    const EngineSnapshot s = engine->Snapshot();
    if (caching) {
      EXPECT_EQ(FirstTokenNs(events, 2), 1'000'000'000 + c.Step({{2048, 100, 1}}).total_ns);
      EXPECT_LT(FirstTokenNs(events, 2) - 1'000'000'000, cold / 2);
      EXPECT_EQ(s.prefix_queries_tok, 3 * 2148);
      EXPECT_EQ(s.prefix_hits_tok, 2048);
    } else {
      EXPECT_EQ(FirstTokenNs(events, 2), 1'000'000'000 + cold);
      EXPECT_EQ(s.prefix_hits_tok, 0);
    }
  }
}

// A request blocked at the head of the queue for hundreds of steps is looked up once.
TEST(EngineModelTest, PrefixQueriesAreCountedOncePerAdmission) {
  auto engine = Engine(SmallKv(4000));
  ASSERT_TRUE(engine->Submit(Req(1, 0, 3500, 400)).ok());
  ASSERT_TRUE(engine->Submit(Req(2, 0, 1000, 1, {5, 6})).ok());
  const std::vector<Event> events = RunAll(*engine);
  EXPECT_GT(FirstTokenNs(events, 2), FirstTokenNs(events, 1) + 300 * 5'000'000);  // it waited
  EXPECT_EQ(engine->Snapshot().prefix_queries_tok, 3500 + 1000);
}

// Cached blocks stay until space is needed; then the least recently used go first.
TEST(EngineModelTest, PrefixCacheEvictsLeastRecentlyUsedBlocks) {
  auto run = [](bool with_d) {
    auto engine = Engine(SmallKv(4000));
    int64_t t = 0;
    std::vector<RequestSpec> reqs = {Req(1, 0, 1100, 1, {1, 2}), Req(2, 0, 1100, 1, {3, 4}),
                                     Req(3, 0, 1100, 1, {5, 6})};
    if (with_d) reqs.push_back(Req(4, 0, 1100, 1, {7, 8}));
    reqs.push_back(Req(5, 0, 1100, 1, {1, 2}));  // A's prefix again
    for (RequestSpec r : reqs) {                 // one at a time
      r.arrival_ns = t;
      EXPECT_TRUE(engine->Submit(r).ok());
      RunAll(*engine);
      t = engine->Snapshot().time_ns + 1;
    }
    return engine->Snapshot().prefix_hits_tok;
  };
  EXPECT_EQ(run(false), 1024);  // 3 x 1024 cached tokens fit: A's blocks are still there
  EXPECT_EQ(run(true), 0);      // the fourth prompt needed A's (oldest) blocks
}

TEST(EngineModelTest, SpeculativeDecodingDeliversMultiTokenChunksFaster) {
  DeploymentConfig spec;
  spec.spec_num_tok = 3;
  spec.spec_mean_accepted_tok = 2;
  auto fast = Engine(spec);
  auto plain = Engine();
  ASSERT_TRUE(fast->Submit(Req(1, 0, 1000, 301)).ok());
  ASSERT_TRUE(plain->Submit(Req(1, 0, 1000, 301)).ok());
  const std::vector<Event> a = RunAll(*fast);
  const std::vector<Event> b = RunAll(*plain);
  ExpectWellFormed(a, {Req(1, 0, 1000, 301)});
  ASSERT_EQ(a.size(), 1u + 100 + 1);  // first token, 100 chunks of 3, finished
  for (size_t i = 1; i + 1 < a.size(); ++i) EXPECT_EQ(a[i].tokens, 3) << i;
  // Each verify step costs a little more than a plain decode, and yields three tokens.
  const CostModel& c = fast->cost();
  EXPECT_EQ(a[2].time_ns - a[1].time_ns, c.Step({{1003, 4, 4}}).total_ns);
  EXPECT_LT(a.back().time_ns * 2, b.back().time_ns);
  const EngineSnapshot s = fast->Snapshot();
  EXPECT_EQ(s.spec_draft_tok, 300);
  EXPECT_EQ(s.spec_accepted_tok, 200);

  spec.spec_mean_accepted_tok = 1.5;  // alternately 1 and 2 accepted
  auto half = Engine(spec);
  ASSERT_TRUE(half->Submit(Req(1, 0, 1000, 11)).ok());
  const std::vector<Event> h = RunAll(*half);
  std::vector<int32_t> chunks;
  for (const Event& e : h) chunks.push_back(e.tokens);
  EXPECT_EQ(chunks, (std::vector<int32_t>{1, 2, 3, 2, 3, 0}));
}

TEST(EngineModelTest, DisaggregationAddsKvTransferToTimeToFirstToken) {
  DeploymentConfig pd;
  pd.prefill_instances = 1;
  pd.decode_instances = 1;
  auto engine = Engine(pd);
  ASSERT_TRUE(engine->Submit(Req(1, 0, 1000, 3)).ok());
  const std::vector<Event> events = RunAll(*engine);
  const CostModel& c = engine->cost();
  const int64_t ttft = c.Step({{0, 1000, 1}}).total_ns + c.KvTransferNs(1000);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, EventKind::kFirstToken);
  EXPECT_EQ(events[0].time_ns, ttft);
  EXPECT_EQ(events[1].time_ns, ttft + c.Step({{1000, 1, 1}}).total_ns);
  EXPECT_EQ(engine->Snapshot().steps, 3);  // one prefill step, two decode steps
}

// A long decode shares its steps with new prompts' prefill chunks when aggregated; with
// disaggregation its inter-token gaps stay at decode-step size.
TEST(EngineModelTest, DisaggregationRemovesPrefillInterferenceFromDecode) {
  std::vector<RequestSpec> reqs = {Req(100, 0, 100, 300)};
  for (uint64_t i = 0; i < 4; ++i) reqs.push_back(Req(i, 50'000'000 + i * 1'000'000, 8000, 2));
  DeploymentConfig agg;
  agg.dp = 2;
  DeploymentConfig pd;
  pd.prefill_instances = 1;
  pd.decode_instances = 1;
  int64_t gap[2];
  int i = 0;
  for (const DeploymentConfig& d : {agg, pd}) {
    auto engine = Engine(d);
    for (const auto& r : reqs) ASSERT_TRUE(engine->Submit(r).ok());
    const std::vector<Event> events = RunAll(*engine);
    ExpectWellFormed(events, reqs);
    gap[i++] = MaxGapNs(events, 100);
  }
  auto probe = Engine();
  const int64_t decode_step = probe->cost().Step({{400, 1, 1}}).total_ns;
  EXPECT_GT(gap[0], 5 * decode_step);  // aggregated: a prefill chunk stalled the decode
  EXPECT_LT(gap[1], 2 * decode_step);  // disaggregated: decode steps only
}

TEST(EngineModelTest, DataParallelSendsRequestsToTheLeastLoadedReplica) {
  DeploymentConfig dp2;
  dp2.dp = 2;
  auto two = Engine(dp2);
  auto one = Engine();
  for (auto* e : {two.get(), one.get()}) {
    ASSERT_TRUE(e->Submit(Req(1, 0, 4000, 2)).ok());
    ASSERT_TRUE(e->Submit(Req(2, 0, 4000, 2)).ok());
  }
  const std::vector<Event> a = RunAll(*two);
  const std::vector<Event> b = RunAll(*one);
  const CostModel& c = two->cost();
  EXPECT_EQ(FirstTokenNs(a, 1), c.Step({{0, 4000, 1}}).total_ns);
  EXPECT_EQ(FirstTokenNs(a, 2), c.Step({{0, 4000, 1}}).total_ns);
  // One replica: the request that woke it is prefilled alone, the other in the next step.
  EXPECT_EQ(FirstTokenNs(b, 1), c.Step({{0, 4000, 1}}).total_ns);
  EXPECT_EQ(FirstTokenNs(b, 2),
            c.Step({{0, 4000, 1}}).total_ns + c.Step({{4000, 1, 1}, {0, 4000, 1}}).total_ns);
}

// An engine's loop that sleeps until work comes starts a step with the request that woke it:
// requests sent "at once" arrive one after another, and the rest join the next step (measured on
// llama.cpp's server: two closed-loop streams alternate their prompts, docs/perfmodel.md). A
// request that arrives while a step runs joins the next one, as before.
TEST(EngineModelTest, TheRequestThatWakesAnIdleEngineStartsAStepAlone) {
  auto engine = Engine();
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(engine->Submit(Req(i, 0, 1000, 2)).ok());
  const std::vector<Event> events = RunAll(*engine);
  const CostModel& c = engine->cost();
  const int64_t alone_ns = c.Step({{0, 1000, 1}}).total_ns;
  EXPECT_EQ(FirstTokenNs(events, 1), alone_ns);
  EXPECT_EQ(FirstTokenNs(events, 2),
            alone_ns + c.Step({{1000, 1, 1}, {0, 1000, 1}, {0, 1000, 1}}).total_ns);
  EXPECT_EQ(FirstTokenNs(events, 3), FirstTokenNs(events, 2));
}

TEST(EngineModelTest, MixedWorkloadsStayWellFormedInEveryLayout) {
  std::vector<RequestSpec> reqs;
  uint64_t x = 12345;
  auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (uint64_t i = 0; i < 200; ++i) {
    const auto input = static_cast<int32_t>(50 + next() % 3000);
    std::vector<uint64_t> hashes;
    for (int b = 0; b * 512 < input; ++b) hashes.push_back(b == 0 ? next() % 4 : next());
    reqs.push_back(Req(i, static_cast<int64_t>(i) * 20'000'000, input,
                       static_cast<int32_t>(1 + next() % 300), hashes));
  }
  DeploymentConfig small = SmallKv(20000);
  DeploymentConfig pd = small;
  pd.prefill_instances = 2;
  pd.decode_instances = 1;
  DeploymentConfig spec = small;
  spec.dp = 2;
  spec.spec_num_tok = 2;
  spec.spec_mean_accepted_tok = 1.3;
  spec.max_num_batched_tokens = 2048;
  for (const DeploymentConfig& d : {small, pd, spec}) {
    auto engine = Engine(d);
    for (const auto& r : reqs) ASSERT_TRUE(engine->Submit(r).ok());
    const std::vector<Event> events = RunAll(*engine);
    ExpectWellFormed(events, reqs);
    const EngineSnapshot s = engine->Snapshot();
    EXPECT_EQ(s.finished, 200);
    EXPECT_EQ(s.running + s.waiting + s.transferring, 0);
    EXPECT_GT(s.prefix_hits_tok, 0);
  }
}

// The chunked-prefill budget (SGLang's --chunked-prefill-size) limits the prompt tokens per
// step: a 4096-token prompt takes four steps of 1024 before its first token.
TEST(EngineModelTest, PrefillChunkBudgetSplitsAPrompt) {
  DeploymentConfig d;
  d.prefill_chunk_tok = 1024;
  auto engine = Engine(d);
  ASSERT_TRUE(engine->Submit(Req(1, 0, 4096, 2)).ok());
  const std::vector<Event> events = RunAll(*engine);
  EXPECT_EQ(engine->Snapshot().steps, 4 + 1);
  DeploymentConfig whole;
  auto unchunked = Engine(whole);
  ASSERT_TRUE(unchunked->Submit(Req(1, 0, 4096, 2)).ok());
  RunAll(*unchunked);
  EXPECT_EQ(unchunked->Snapshot().steps, 1 + 1);
}

// Without chunked prefill a prompt is prefilled whole, even beyond the step's budget; without
// mixed batches (vLLM V0) a prefill step carries no decodes, so a running request stalls while
// a new prompt is prefilled.
TEST(EngineModelTest, UnchunkedAndUnmixedPrefillStallsDecodes) {
  DeploymentConfig d;
  d.max_num_batched_tokens = 512;
  d.chunked_prefill = false;
  auto engine = Engine(d);
  ASSERT_TRUE(engine->Submit(Req(1, 0, 2000, 3)).ok());
  RunAll(*engine);
  EXPECT_EQ(engine->Snapshot().steps, 1 + 2);  // one whole prefill step, two decodes
  d = {};
  d.mixed_batches = false;
  auto v0 = Engine(d);
  auto v1 = Engine({});
  for (auto* e : {v0.get(), v1.get()}) {
    ASSERT_TRUE(e->Submit(Req(1, 0, 100, 200)).ok());
    ASSERT_TRUE(e->Submit(Req(2, 50'000'000, 8000, 2)).ok());
  }
  const std::vector<Event> unmixed = RunAll(*v0), mixed = RunAll(*v1);
  // Request 1's longest gap holds the 8000-token prefill either way; unmixed it also skips its
  // own decode in that step, so its tokens come later.
  EXPECT_GT(MaxGapNs(unmixed, 1), MaxGapNs(mixed, 1) * 9 / 10);
  int64_t end_unmixed = 0, end_mixed = 0;
  for (const Event& e : Of(unmixed, 1)) end_unmixed = std::max(end_unmixed, e.time_ns);
  for (const Event& e : Of(mixed, 1)) end_mixed = std::max(end_mixed, e.time_ns);
  EXPECT_GT(end_unmixed, end_mixed);
}

// vLLM's multi-step scheduling: decode tokens come in bursts of decode_steps, and a request
// arriving mid-burst waits for the burst's end before its prefill.
TEST(EngineModelTest, MultiStepDeliversDecodeTokensInBursts) {
  DeploymentConfig d;
  d.decode_steps = 10;
  auto engine = Engine(d);
  ASSERT_TRUE(engine->Submit(Req(1, 0, 100, 41)).ok());
  const std::vector<Event> events = RunAll(*engine);
  std::vector<int32_t> chunks;
  for (const Event& e : Of(events, 1)) {
    if (e.kind == EventKind::kTokens || e.kind == EventKind::kFirstToken)
      chunks.push_back(e.tokens);
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{1, 10, 10, 10, 10}));
  EXPECT_EQ(engine->Snapshot().steps, 1 + 40);
}

// The engine's front end (request_us) delays every request before the scheduler sees it.
TEST(EngineModelTest, FrontEndDelayIsInTimeToFirstToken) {
  DeploymentConfig d;
  auto bare = Engine(d);
  ASSERT_TRUE(SetCoefficient(&d.engine, "cpu.request_us", 5000).ok());
  auto delayed = Engine(d);
  ASSERT_TRUE(bare->Submit(Req(1, 0, 100, 2)).ok());
  ASSERT_TRUE(delayed->Submit(Req(1, 0, 100, 2)).ok());
  EXPECT_EQ(FirstTokenNs(RunAll(*delayed), 1) - FirstTokenNs(RunAll(*bare), 1), 5'000'000);
}

// The API server's request path is one queue per process: 400 requests sent at once through
// a 5 ms-per-request process arrive at 200 requests/s, the last after 2 s; two processes halve it.
TEST(EngineModelTest, TheApiServerCapsTheRequestRate) {
  auto last_first_token_ns = [](int api_servers) {
    DeploymentConfig d;
    d.api_servers = api_servers;
    EXPECT_TRUE(SetCoefficient(&d.engine, "cpu.api_request_us", 5000).ok());
    auto engine = Engine(d);
    for (uint64_t i = 0; i < 400; ++i) EXPECT_TRUE(engine->Submit(Req(i, 0, 16, 1)).ok());
    int64_t last = 0;
    for (const Event& e : RunAll(*engine)) {
      if (e.kind == EventKind::kFirstToken) last = std::max(last, e.time_ns);
    }
    return last;
  };
  const int64_t one = last_first_token_ns(1), two = last_first_token_ns(2);
  EXPECT_GE(one, 2'000'000'000);
  EXPECT_LT(one, 2'050'000'000);  // a 16-token prefill step after the last arrival
  EXPECT_GE(two, 1'000'000'000);
  EXPECT_LT(two, 1'050'000'000);
}

// The output path: 16 requests of 100 tokens decode together in about 0.55 s, but one process
// streams 1,000 tokens/s, so the client gets their 1,600 tokens over at least 1.6 s, in time order, each
// request's events intact; the engine's own steps are unchanged (its finish counter is earlier).
TEST(EngineModelTest, TheApiServerCapsTheStreamedTokenRate) {
  std::vector<RequestSpec> reqs;
  for (uint64_t i = 0; i < 16; ++i) reqs.push_back(Req(i, 0, 64, 100));
  auto run = [&](double api_token_us) {
    DeploymentConfig d;
    EXPECT_TRUE(SetCoefficient(&d.engine, "cpu.api_token_us", api_token_us).ok());
    auto engine = Engine(d);
    for (const auto& r : reqs) EXPECT_TRUE(engine->Submit(r).ok());
    return RunAll(*engine);
  };
  const std::vector<Event> bare = run(0), capped = run(1000);
  auto span_ns = [](const std::vector<Event>& events) {
    return events.back().time_ns - events.front().time_ns;
  };
  EXPECT_LT(span_ns(bare), 1'000'000'000);  // the engine alone: 100 steps of ~5 ms
  EXPECT_GE(span_ns(capped), 1'599'000'000);
  ASSERT_EQ(capped.size(), bare.size());
  EXPECT_TRUE(std::is_sorted(capped.begin(), capped.end(), [](const Event& a, const Event& b) {
    return a.time_ns < b.time_ns;
  }));
  ExpectWellFormed(capped, reqs);
}

// A cancelled request's tokens still queued in its API process are not sent.
TEST(EngineModelTest, ACancelledRequestsQueuedTokensAreNotStreamed) {
  DeploymentConfig d;
  ASSERT_TRUE(SetCoefficient(&d.engine, "cpu.api_token_us", 20000).ok());
  auto engine = Engine(d);
  ASSERT_TRUE(engine->Submit(Req(1, 0, 64, 50)).ok());
  std::vector<Event> got;
  // The engine decodes all 50 tokens in well under 0.5 s; the process streams 50 per second.
  engine->AdvanceTo(500'000'000, [&](const Event& e) { got.push_back(e); });
  const size_t before = got.size();
  EXPECT_GT(before, 0u);
  EXPECT_LT(before, 50u);
  ASSERT_TRUE(engine->Cancel(1));
  const std::vector<Event> after = RunAll(*engine);
  EXPECT_TRUE(after.empty());
}

// Multi-LoRA as vLLM's scheduler runs it: with one slot, requests of another adapter wait
// (skipped, not blocking the queue) while the slot's adapter has running requests; each adapter
// is copied in once per switch, and that copy lengthens the step it starts. With two slots all
// four run together.
TEST(EngineModelTest, LoraAdaptersBeyondTheSlotsWaitAndEachSwitchPaysALoad) {
  auto run = [](int max_loras, EngineSnapshot* snapshot) {
    DeploymentConfig d;
    d.lora_rank = 16;
    d.max_loras = max_loras;
    auto engine = Engine(d);
    for (uint64_t id = 0; id < 4; ++id) {
      RequestSpec r = Req(id, 0, 100, 20);
      r.adapter = static_cast<int32_t>(id % 2);  // 0, 1, 0, 1
      EXPECT_TRUE(engine->Submit(std::move(r)).ok());
    }
    const auto events = RunAll(*engine);
    *snapshot = engine->Snapshot();
    std::map<uint64_t, int64_t> first, last;
    for (const Event& e : events) {
      if (e.kind == EventKind::kFirstToken) first[e.id] = e.time_ns;
      if (e.kind == EventKind::kFinished) last[e.id] = e.time_ns;
    }
    return std::pair{first, last};
  };
  EngineSnapshot one_slot, two_slots;
  const auto [first1, last1] = run(1, &one_slot);
  const auto [first2, last2] = run(2, &two_slots);
  // Request 0 starts a step alone (the others arrive as it starts: docs/perfmodel.md). One slot:
  // request 2 joins the next step past request 1; adapter 1's requests start together only
  // after both of adapter 0's ended.
  EXPECT_LT(first1.at(2), first1.at(1));
  EXPECT_GE(first1.at(1), std::max(last1.at(0), last1.at(2)));
  EXPECT_EQ(first1.at(1), first1.at(3));
  EXPECT_EQ(one_slot.lora_loads, 2);
  // Two slots: requests 1, 2 and 3 join the second step together; each adapter loaded once.
  EXPECT_EQ(first2.at(1), first2.at(2));
  EXPECT_EQ(first2.at(1), first2.at(3));
  EXPECT_LT(last2.at(3), last1.at(3));
  EXPECT_EQ(two_slots.lora_loads, 2);
  // The first step carries adapter 0's load: later than a base model's first token.
  DeploymentConfig plain;
  auto base = Engine(plain);
  EXPECT_TRUE(base->Submit(Req(0, 0, 100, 20)).ok());
  int64_t base_first = 0;
  for (const Event& e : RunAll(*base)) {
    if (e.kind == EventKind::kFirstToken) base_first = e.time_ns;
  }
  CostModel cost;
  ASSERT_TRUE(CostModel::Create(
                  Load().hw, Load().model,
                  [] {
                    DeploymentConfig d;
                    d.lora_rank = 16;
                    return d;
                  }(),
                  &cost)
                  .ok());
  EXPECT_GE(first2.at(0) - base_first, cost.LoraLoadNs());
  EXPECT_GT(cost.LoraLoadNs(), 0);
}

}  // namespace
}  // namespace servesweep::perfmodel
