// EngineModel: an LLM serving engine (or a fleet of replicas, or prefill and decode pools)
// modelled step by step, the way vLLM's V1 scheduler runs: continuous batching, chunked prefill
// under a token budget, recompute preemption when the KV cache is full, an LRU prefix cache over
// caller-provided block hashes, speculative decoding with a mean acceptance length, LoRA
// adapters in max_loras GPU slots. Each step's
// duration comes from CostModel (perfmodel/step_cost.h); docs/perfmodel.md has the equations.
//
// Time is a number the caller supplies (ns on any clock), so one model serves both
//  - a real-time emulator: Submit() each request as it arrives, arm a timer for NextEventNs(),
//    and on each tick call AdvanceTo(now) and send the events to the clients; and
//  - a virtual-time planner: Submit() a whole schedule, then AdvanceTo(NextEventNs()) until
//    NextEventNs() == kNever (SimulateWorkload in perfmodel/simulate.h does exactly that).
//
//   std::unique_ptr<EngineModel> engine;
//   Status s = EngineModel::Create(gpu, model, deployment, &engine);
//   engine->Submit({.id = 1, .arrival_ns = 0, .input_tok = 1000, .output_tok = 200});
//   while (engine->NextEventNs() != EngineModel::kNever)
//     engine->AdvanceTo(engine->NextEventNs(), [](const Event& e) { ... });
//
// The API server (EngineCoefficients::api_request_us / api_token_us) delays a request on its way
// in and its tokens on their way out when its process is busy: an event's time is when the
// client would receive it, which may be after the step that produced it.
//
// Events come out in time order: kFirstToken (1 token), kTokens (a chunk of one or more tokens:
// several with speculative decoding), kFinished (after the last chunk, same time), kPreempted
// (the request lost its KV cache and will recompute; no token is repeated), kRejected (it can
// never fit in the KV cache). A step's tokens are stamped with the step's end. A cancelled
// request emits nothing more.
//
// Thread-safety: none. One thread drives an EngineModel (an emulator's event loop); a separate
// instance per thread is fine (they share nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "common/status.h"
#include "perfmodel/deployment.h"
#include "perfmodel/profiles.h"
#include "perfmodel/step_cost.h"

namespace servesweep::perfmodel {

struct RequestSpec {
  uint64_t id = 0;         // unique among the requests in the engine
  int64_t arrival_ns = 0;  // when it reaches the engine (earlier than now = now)
  int32_t input_tok = 0;   // >= 1
  int32_t output_tok = 1;  // >= 1; the request ends after exactly this many tokens
  // Hashes of the prompt's leading blocks of block_size_tok tokens, in order (Mooncake's
  // hash_ids): equal hashes mean equal prefixes. Empty = nothing to share.
  std::vector<uint64_t> block_hashes;
  // Its LoRA adapter (0-based; DeploymentConfig::lora_rank > 0), -1 = the base model.
  int32_t adapter = -1;
};

enum class EventKind { kFirstToken, kTokens, kFinished, kPreempted, kRejected };

struct Event {
  EventKind kind = EventKind::kTokens;
  uint64_t id = 0;
  int64_t time_ns = 0;
  int32_t tokens = 0;  // tokens delivered by this event (kFirstToken, kTokens); else 0
};

using EventSink = std::function<void(const Event&)>;

// Gauges (now) and counters (since Create), named after vLLM's /metrics where one exists.
struct EngineSnapshot {
  int64_t time_ns = 0;             // how far the model has advanced
  int32_t running = 0;             // vllm:num_requests_running
  int32_t waiting = 0;             // vllm:num_requests_waiting (submitted, arrived, not running)
  int32_t transferring = 0;        // disaggregated: KV on its way from prefill to decode
  double kv_usage = 0;             // vllm:kv_cache_usage_perc, 0..1 (all instances together)
  int64_t kv_capacity_tok = 0;     // per instance
  int64_t preemptions = 0;         // vllm:num_preemptions
  int64_t prefix_queries_tok = 0;  // vllm:prefix_cache_queries (tokens looked up)
  int64_t prefix_hits_tok = 0;     // vllm:prefix_cache_hits (tokens found)
  int64_t prompt_tok = 0;          // vllm:prompt_tokens (requests whose prefill completed)
  int64_t generation_tok = 0;      // vllm:generation_tokens
  int64_t spec_draft_tok = 0;      // vllm:spec_decode_num_draft_tokens
  int64_t spec_accepted_tok = 0;   // vllm:spec_decode_num_accepted_tokens
  int64_t steps = 0;               // engine steps, all instances
  int64_t finished = 0;
  int64_t rejected = 0;
  int64_t cancelled = 0;   // Cancel()ed before they finished
  int64_t lora_loads = 0;  // LoRA adapters copied into a GPU slot
};

class EngineModel {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  static Status Create(const HardwareProfile& hw, const ModelProfile& model,
                       const DeploymentConfig& deployment, std::unique_ptr<EngineModel>* out);
  ~EngineModel();
  EngineModel(const EngineModel&) = delete;
  EngineModel& operator=(const EngineModel&) = delete;

  // Queues a request for its arrival time. Fails on a duplicate id or empty lengths.
  Status Submit(RequestSpec request);

  // Aborts a request (its client went away): it emits nothing more and its KV cache is freed
  // now, or when the step computing it ends. False if the id is unknown or already over.
  bool Cancel(uint64_t id);

  // When the next thing happens (an arrival, a step's end, a KV transfer's end); kNever if idle.
  int64_t NextEventNs() const;

  // Runs everything due at or before now_ns, calling `sink` for each event in time order.
  void AdvanceTo(int64_t now_ns, const EventSink& sink);

  EngineSnapshot Snapshot() const;
  // Drops every cached prefix block (vLLM's /reset_prefix_cache). Refused (false, nothing
  // dropped) while a request is waiting, running or in transfer, as vLLM refuses while blocks
  // are held.
  bool ResetPrefixCache();

  // From process start to ready: weight load + graph capture (the emulator's /health delay).
  int64_t ColdStartNs() const;

  const CostModel& cost() const;

 private:
  class Impl;
  explicit EngineModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace servesweep::perfmodel
