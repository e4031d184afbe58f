// A timing core backed by the performance model (perfmodel/): continuous batching across every
// stream of the emulator, KV cache, preemption, prefix cache, speculative decoding and the
// parallel layout, on the real clock. The emulator's HTTP front end stays as it is; only WHEN
// tokens appear changes (engine_core.h).
//
// Thread-safety: as every EngineCore: called from the driver's one strand only.
#pragma once

#include <memory>
#include <unordered_map>

#include "common/status.h"
#include "perfmodel/engine_model.h"
#include "sim/engine_core.h"

namespace servesweep::sim {

class PerfModelCore : public EngineCore {
 public:
  // `origin_ns` (steady clock) becomes the model's time 0.
  static Status Create(const perfmodel::HardwareProfile& hardware,
                       const perfmodel::ModelProfile& model,
                       const perfmodel::DeploymentConfig& deployment, int64_t origin_ns,
                       std::unique_ptr<PerfModelCore>* out);

  void Submit(const EngineRequest& request) override;
  void Cancel(uint64_t id, int64_t now_ns) override;
  int64_t NextEventNs() const override;
  void AdvanceTo(int64_t now_ns, TokenSink& sink) override;
  EngineSnapshot Snapshot() const override;
  bool ResetPrefixCache() override { return engine_->ResetPrefixCache(); }

  // Process start -> ready, as the model says (weight load + graph capture).
  int64_t ColdStartNs() const { return engine_->ColdStartNs(); }
  // The longest request (prompt + output tokens) that fits one instance's KV cache.
  int64_t KvCapacityTok() const { return engine_->Snapshot().kv_capacity_tok; }

 private:
  PerfModelCore(std::unique_ptr<perfmodel::EngineModel> engine, int64_t origin_ns)
      : engine_(std::move(engine)), origin_ns_(origin_ns) {}

  std::unique_ptr<perfmodel::EngineModel> engine_;
  int64_t origin_ns_;
  std::unordered_map<uint64_t, int64_t> remaining_tok_;  // per request not yet finished
};

}  // namespace servesweep::sim
