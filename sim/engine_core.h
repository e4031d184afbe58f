// The emulator's timing core: the one small interface between the HTTP front end (which parses
// requests and renders SSE) and whatever decides WHEN tokens appear. The fixed schedule
// (fixed_schedule.h: ttft + k * itl per request) is one implementation; a performance model with
// continuous batching across all requests is another. The front end never computes a token time.
//
// Contract (MLPerf LoadGen style: the system under test is one interface):
//   - Submit() admits a request; Cancel() withdraws one whose client went away.
//   - NextEventNs() is the earliest instant at which AdvanceTo() would emit something (or change
//     state), INT64_MAX when idle. The driver (engine_driver.h) arms ONE timer for it.
//   - AdvanceTo(now_ns, sink) runs the engine up to now_ns and emits, in time order, every event
//     due at or before now_ns. Event times are the model's instants (<= now_ns), not the time of
//     the call: a late AdvanceTo never shifts the schedule.
//   - Every admitted request ends with exactly one event with finished = true, unless cancelled;
//     after Cancel() no event names it.
//   - Snapshot() reports the engine-side gauges and counters served on /metrics.
//   - ResetPrefixCache() (optional; the emulator's /reset_prefix_cache and /flush_cache) drops
//     every cached prefix, as of the last AdvanceTo(); false, dropping nothing, while a request
//     is admitted and unfinished. A core without a prefix cache has nothing to drop: true.
// All instants are std::chrono::steady_clock nanoseconds since its epoch.
//
// Thread-safety: a core is NOT thread-safe; the driver calls it from one strand only, so a core
// may keep global state (a batch, a KV cache, a waiting queue) without locks.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace servesweep::sim {

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

struct EngineRequest {
  uint64_t id = 0;         // unique per emulator (the request's sequence number)
  int64_t arrival_ns = 0;  // when its first bytes were received (else when it was parsed)
  int64_t prompt_tok = 0;
  int64_t max_tok = 1;  // the output is exactly this many tokens (no early stop)
  // Hashes of the prompt's full KV blocks, chained (hash k covers blocks 0..k); empty when the
  // front end has none to give (the emulator has no tokenizer). For prefix-cache models.
  std::vector<uint64_t> prefix_block_hashes;
  int32_t adapter = -1;  // the LoRA adapter it names (EmulatorSettings::lora_adapters); -1: base
};

// One step's output for one request: `tokens` new tokens (1 normally; more under speculative
// decoding), rendered by the front end as ONE SSE event carrying all of them.
struct TokenEvent {
  uint64_t id = 0;
  int64_t time_ns = 0;    // the model's instant for this chunk
  int32_t tokens = 1;     // >= 1
  bool finished = false;  // the request's last chunk
};

class TokenSink {
 public:
  virtual ~TokenSink() = default;
  virtual void OnEvent(const TokenEvent& event) = 0;
};

// Engine-side state for /metrics (both personas map these to their own names).
struct EngineSnapshot {
  int64_t running = 0;                   // requests in the running batch
  int64_t waiting = 0;                   // requests queued, not yet scheduled
  int64_t kv_used_tok = 0;               // KV-cache tokens held
  int64_t kv_capacity_tok = 1;           // KV-cache size in tokens (> 0)
  int64_t preemptions_total = 0;         // cumulative
  int64_t prefix_cache_queries_tok = 0;  // cumulative prompt tokens looked up
  int64_t prefix_cache_hits_tok = 0;     // cumulative prompt tokens found cached
};

class EngineCore {
 public:
  virtual ~EngineCore() = default;

  virtual void Submit(const EngineRequest& request) = 0;
  // The client went away at now_ns: release the request; emit nothing more for it.
  virtual void Cancel(uint64_t id, int64_t now_ns) = 0;
  virtual int64_t NextEventNs() const = 0;
  virtual void AdvanceTo(int64_t now_ns, TokenSink& sink) = 0;
  virtual EngineSnapshot Snapshot() const = 0;
  virtual bool ResetPrefixCache() { return true; }
};

}  // namespace servesweep::sim
