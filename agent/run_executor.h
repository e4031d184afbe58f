// Executes one assigned run on its own thread. Head: start the engine, wait until it is ready
// (health, model list, one probe request; cold start measured apart), run the load while
// scraping /metrics and sampling GPU telemetry, stop the engine, and build the RunResult.
// Under engine_lifecycle per_configuration (one agent) the head reuses the engine the agent
// kept from the previous run of its configuration (its prefix cache reset, the engine idle),
// and keeps its engine for the next one when the assignment says so (ServingEngine).
// Worker: start the engine's worker part (if any), or reuse the part kept from the previous run
// when the assignment says the whole group reuses its engine (Assign.reuseEngine), and hold
// until released, reading its GPUs' energy counters when the head asks (agent/peer_energy.h);
// released with keepEngine, the part stays up for the next run of its configuration.
// The agent's loop keeps heartbeating meanwhile and polls Finished().
//
// Thread-safety: Cancel(), Finished(), progress accessors may be called from the owning thread
// while the run thread works; TakeResult() only after Finished().
#pragma once

#include <capnp/message.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/peer_energy.h"
#include "agent/serving_engine.h"
#include "common/status.h"
#include "engines/engine_adapter.h"
#include "schema/wire.capnp.h"

namespace servesweep::agent {

struct ExecutorContext {
  std::string agent_id;
  std::string work_dir;  // engine logs go here
  std::string gpu_model;
  std::string interconnect;
  bool engine_check = true;  // the engines' own check before they start (engine_check.h)
};

// What the adapters get of an assignment: spec, role, rank, group size, the head's address and
// every agent's address in placement order (port and executable are the executor's to set).
// The context reads `assign`, which must outlive it.
engines::LaunchContext LaunchContextFor(schema::Assign::Reader assign);

// Readiness's last step: one tiny completion (1 token, not streamed) on the run's API
// (/v1/completions, or /v1/chat/completions), which must answer 200 with choices.
Status ProbeCompletion(const std::string& base_url, const std::string& model, bool chat,
                       const std::string& api_key, long timeout_ms,
                       const std::string& prompt = "Hello");

class HeadRun;

class RunExecutor {
 public:
  // `kept`: the engine the agent kept from its previous run (or null): reused when it is this
  // run's configuration and alive, else stopped before anything starts.
  RunExecutor(schema::Assign::Reader assign, ExecutorContext context,
              std::unique_ptr<ServingEngine> kept = nullptr);
  ~RunExecutor();  // cancels and joins
  RunExecutor(const RunExecutor&) = delete;
  RunExecutor& operator=(const RunExecutor&) = delete;

  void Cancel(const std::string& reason);
  // The coordinator released the run: as Cancel, except that a worker told to keep its engine
  // (its head's run was committed with keepEngine) leaves its processes up for the next run.
  void Release(const std::string& reason, bool keep_engine);
  // The agent was stopped or starved while this run was measured: cancels it if still running,
  // and a result already made is reported failed with `reason`, never as a measurement.
  void Distrust(const std::string& reason);
  bool cancelled() const { return cancelled_.load(); }
  bool Finished() const { return finished_.load(); }
  // The RunResult message (head), or nullptr (worker, or nothing to report).
  std::unique_ptr<capnp::MallocMessageBuilder> TakeResult();
  // After Finished(): the engine to keep up for the next run of its configuration, or null.
  std::unique_ptr<ServingEngine> TakeKeptEngine();
  // The configuration whose engine this run is to keep (the assignment's keepEngine), or "".
  const std::string& kept_configuration() const { return kept_configuration_; }

  const std::string& run_id() const { return run_id_; }
  uint32_t attempt() const { return attempt_; }
  schema::Role role() const { return role_; }
  uint32_t group_size() const { return group_size_; }
  double timeout_s() const { return timeout_s_; }
  int64_t started_ns() const { return started_ns_; }
  // Requests done and planned in the current phase: warm-up, then the measured requests.
  uint32_t completed_requests() const { return completed_.load(); }
  uint32_t total_requests() const { return total_.load(); }
  std::string phase() const;
  // The other nodes' energy reads of a multi-node run, carried by the agent's loop.
  PeerEnergyMailbox& peer_energy() { return peer_energy_; }

 private:
  friend class HeadRun;  // the head's phases (run_executor.cc)
  void Execute();
  void Join();
  void ExecuteHead(schema::RunResult::Builder result);
  void ExecuteWorker();
  // A worker's part of a fresh engine (its adapter's processes for this rank, checked first).
  void StartWorkerPart(schema::Assign::Reader assign, EngineGroup& engines);
  void SetPhase(const char* phase);
  // Records (or, with 0, forgets) the process groups Cancel() kills.
  void SetEnginePgids(std::vector<int> pgids);
  std::string cancel_reason() const;

  capnp::MallocMessageBuilder assign_message_;  // our own copy of the Assign
  ExecutorContext context_;
  std::string run_id_;
  uint32_t attempt_ = 0;
  schema::Role role_ = schema::Role::HEAD;
  uint32_t group_size_ = 1;
  double timeout_s_ = 0;
  int64_t started_ns_ = 0;

  std::atomic<bool> cancelled_{false};
  std::atomic<bool> finished_{false};
  std::atomic<uint32_t> completed_{0};
  std::atomic<uint32_t> total_{0};
  mutable std::mutex mutex_;
  std::vector<int> engine_pgids_;  // guarded by mutex_: to stop a blocked load by killing engines
  std::string cancel_reason_;
  std::string distrust_reason_;  // guarded by mutex_
  const char* phase_ = "starting";
  std::unique_ptr<capnp::MallocMessageBuilder> result_;
  std::string kept_configuration_;
  std::atomic<bool> keep_on_release_{false};  // a worker's: Release() said keep the engine
  std::unique_ptr<ServingEngine> kept_in_;    // the run thread's until it decides
  std::unique_ptr<ServingEngine> kept_out_;   // guarded by mutex_
  PeerEnergyMailbox peer_energy_;
  std::thread thread_;
};

}  // namespace servesweep::agent
