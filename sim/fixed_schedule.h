// The emulator's default timing core: every request on its own fixed, absolute schedule,
// independent of the others (no batching, no queueing). Chunk j of a request (j = 0, 1, ...)
// is due at arrival + ttft + j * itl and carries tokens_per_chunk tokens (the last chunk the
// remainder): with tokens_per_chunk = 1, token k is due at arrival + ttft + k * itl.
//
// Engine signals: every admitted request is running (waiting is 0); the KV cache holds each
// running request's prompt and the tokens emitted so far; no preemptions; every prompt token
// is a prefix-cache query and none is a hit. LoRA adapters beyond the slots pay a load (below).
//
// Thread-safety: none (an EngineCore; see engine_core.h).
#pragma once

#include <cstdint>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/engine_core.h"

namespace servesweep::sim {

struct FixedScheduleSettings {
  int64_t ttft_ns = 0;
  int64_t itl_ns = 0;
  int32_t tokens_per_chunk = 1;  // > 1 emulates speculative decoding's multi-token steps
  int64_t kv_capacity_tok = 1000000;
  // Multi-LoRA: `lora_slots` adapters stay loaded (0: every adapter, never a load); a request
  // whose adapter is not among the most recently used ones loads it, evicting the least
  // recently used, and its schedule starts lora_load_ns later.
  int32_t lora_slots = 0;
  int64_t lora_load_ns = 0;
};

class FixedScheduleCore final : public EngineCore {
 public:
  explicit FixedScheduleCore(FixedScheduleSettings settings);

  void Submit(const EngineRequest& request) override;
  void Cancel(uint64_t id, int64_t now_ns) override;
  int64_t NextEventNs() const override;
  void AdvanceTo(int64_t now_ns, TokenSink& sink) override;
  EngineSnapshot Snapshot() const override;

 private:
  struct Stream {
    int64_t arrival_ns;
    int64_t prompt_tok;
    int64_t max_tok;
    int64_t emitted_tok = 0;
    int64_t next_chunk = 0;
  };
  using Due = std::pair<int64_t, uint64_t>;  // (due_ns, id): earliest first, ties by id

  int64_t DueNs(const Stream& stream) const;

  FixedScheduleSettings settings_;
  std::unordered_map<uint64_t, Stream> streams_;
  // Entries of cancelled streams stay until they surface (lazy deletion).
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_;
  // Whether `adapter` had to be loaded; the slots updated (most recently used last).
  bool UseAdapter(int32_t adapter);

  int64_t kv_used_tok_ = 0;
  int64_t prompt_tok_total_ = 0;
  std::vector<int32_t> loaded_adapters_;  // least recently used first, at most lora_slots
};

}  // namespace servesweep::sim
