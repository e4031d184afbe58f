#include "sim/fixed_schedule.h"

#include <algorithm>

namespace servesweep::sim {

FixedScheduleCore::FixedScheduleCore(FixedScheduleSettings settings) : settings_(settings) {
  settings_.tokens_per_chunk = std::max(settings_.tokens_per_chunk, 1);
}

int64_t FixedScheduleCore::DueNs(const Stream& stream) const {
  return stream.arrival_ns + settings_.ttft_ns + stream.next_chunk * settings_.itl_ns;
}

bool FixedScheduleCore::UseAdapter(int32_t adapter) {
  if (adapter < 0 || settings_.lora_slots <= 0) return false;
  auto it = std::find(loaded_adapters_.begin(), loaded_adapters_.end(), adapter);
  const bool load = it == loaded_adapters_.end();
  if (!load) loaded_adapters_.erase(it);
  if (load && static_cast<int32_t>(loaded_adapters_.size()) >= settings_.lora_slots) {
    loaded_adapters_.erase(loaded_adapters_.begin());
  }
  loaded_adapters_.push_back(adapter);
  return load;
}

void FixedScheduleCore::Submit(const EngineRequest& request) {
  const bool load = UseAdapter(request.adapter);
  Stream stream{.arrival_ns = request.arrival_ns + (load ? settings_.lora_load_ns : 0),
                .prompt_tok = request.prompt_tok,
                .max_tok = std::max<int64_t>(request.max_tok, 1)};
  due_.emplace(DueNs(stream), request.id);
  streams_.emplace(request.id, stream);
  kv_used_tok_ += request.prompt_tok;
  prompt_tok_total_ += request.prompt_tok;
}

void FixedScheduleCore::Cancel(uint64_t id, int64_t /*now_ns*/) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  kv_used_tok_ -= it->second.prompt_tok + it->second.emitted_tok;
  streams_.erase(it);
}

int64_t FixedScheduleCore::NextEventNs() const {
  // A cancelled stream's entry may surface first: an early wake-up that emits nothing.
  return due_.empty() ? kNever : due_.top().first;
}

void FixedScheduleCore::AdvanceTo(int64_t now_ns, TokenSink& sink) {
  while (!due_.empty() && due_.top().first <= now_ns) {
    const auto [due_ns, id] = due_.top();
    due_.pop();
    auto it = streams_.find(id);
    if (it == streams_.end()) continue;  // cancelled
    Stream& stream = it->second;
    const int64_t tokens =
        std::min<int64_t>(settings_.tokens_per_chunk, stream.max_tok - stream.emitted_tok);
    stream.emitted_tok += tokens;
    ++stream.next_chunk;
    kv_used_tok_ += tokens;
    const bool finished = stream.emitted_tok == stream.max_tok;
    sink.OnEvent({.id = id,
                  .time_ns = due_ns,
                  .tokens = static_cast<int32_t>(tokens),
                  .finished = finished});
    if (finished) {
      kv_used_tok_ -= stream.prompt_tok + stream.emitted_tok;
      streams_.erase(it);
    } else {
      due_.emplace(DueNs(stream), id);
    }
  }
}

EngineSnapshot FixedScheduleCore::Snapshot() const {
  return {.running = static_cast<int64_t>(streams_.size()),
          .waiting = 0,
          .kv_used_tok = kv_used_tok_,
          .kv_capacity_tok = settings_.kv_capacity_tok,
          .preemptions_total = 0,
          .prefix_cache_queries_tok = prompt_tok_total_,
          .prefix_cache_hits_tok = 0};
}

}  // namespace servesweep::sim
