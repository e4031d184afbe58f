#include "sim/perf_model_core.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace servesweep::sim {

Status PerfModelCore::Create(const perfmodel::HardwareProfile& hardware,
                             const perfmodel::ModelProfile& model,
                             const perfmodel::DeploymentConfig& deployment, int64_t origin_ns,
                             std::unique_ptr<PerfModelCore>* out) {
  std::unique_ptr<perfmodel::EngineModel> engine;
  if (Status s = perfmodel::EngineModel::Create(hardware, model, deployment, &engine); !s.ok()) {
    return s;
  }
  out->reset(new PerfModelCore(std::move(engine), origin_ns));
  return Status::Ok();
}

void PerfModelCore::Submit(const EngineRequest& request) {
  perfmodel::RequestSpec spec;
  spec.id = request.id;
  spec.arrival_ns = request.arrival_ns - origin_ns_;
  spec.input_tok = static_cast<int32_t>(std::max<int64_t>(1, request.prompt_tok));
  spec.output_tok = static_cast<int32_t>(std::max<int64_t>(1, request.max_tok));
  spec.block_hashes = request.prefix_block_hashes;
  spec.adapter = request.adapter;
  remaining_tok_[request.id] = spec.output_tok;
  if (Status s = engine_->Submit(std::move(spec)); !s.ok()) {
    // Only a duplicate id fails here, which the front end never sends.
    spdlog::error("sim: the performance model refused request {}: {}", request.id, s.message());
  }
}

void PerfModelCore::Cancel(uint64_t id, int64_t /*now_ns*/) {
  engine_->Cancel(id);
  remaining_tok_.erase(id);
}

int64_t PerfModelCore::NextEventNs() const {
  const int64_t next = engine_->NextEventNs();
  return next == perfmodel::EngineModel::kNever ? kNever : next + origin_ns_;
}

void PerfModelCore::AdvanceTo(int64_t now_ns, TokenSink& sink) {
  engine_->AdvanceTo(now_ns - origin_ns_, [&](const perfmodel::Event& e) {
    auto it = remaining_tok_.find(e.id);
    if (it == remaining_tok_.end()) return;
    switch (e.kind) {
      case perfmodel::EventKind::kFirstToken:
      case perfmodel::EventKind::kTokens: {
        // The chunk that brings the count to the request's length is its last one.
        it->second -= e.tokens;
        const bool finished = it->second <= 0;
        sink.OnEvent({e.id, e.time_ns + origin_ns_, e.tokens, finished});
        if (finished) remaining_tok_.erase(it);
        break;
      }
      case perfmodel::EventKind::kRejected:
        // Never fits the KV cache: the front end caps prompt + max_tokens at the KV capacity,
        // so this is a model limit; end the stream with one token rather than hang it.
        spdlog::warn("sim: request {} never fits the model's KV cache; ended early", e.id);
        sink.OnEvent({e.id, e.time_ns + origin_ns_, 1, true});
        remaining_tok_.erase(it);
        break;
      case perfmodel::EventKind::kFinished:
      case perfmodel::EventKind::kPreempted:
        break;
    }
  });
}

EngineSnapshot PerfModelCore::Snapshot() const {
  const perfmodel::EngineSnapshot s = engine_->Snapshot();
  EngineSnapshot out;
  out.running = s.running;
  out.waiting = s.waiting + s.transferring;
  // The usage fraction covers every instance; served as used / capacity of one instance.
  out.kv_capacity_tok = std::max<int64_t>(1, s.kv_capacity_tok);
  out.kv_used_tok = static_cast<int64_t>(s.kv_usage * static_cast<double>(out.kv_capacity_tok));
  out.preemptions_total = s.preemptions;
  out.prefix_cache_queries_tok = s.prefix_queries_tok;
  out.prefix_cache_hits_tok = s.prefix_hits_tok;
  return out;
}

}  // namespace servesweep::sim
