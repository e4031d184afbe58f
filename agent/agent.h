// The agent: one per node. Connects a DEALER socket (its identity = its agent id) to the
// coordinator, says hello with its inventory, heartbeats, executes assigned runs, and delivers
// results through its spool (write, send, delete on ack). When the coordinator falls silent for
// `liveness` heartbeats it reconnects with exponential backoff and says hello again, then resends
// every spooled result (zguide's Paranoid Pirate worker).
//
// Thread-safety: Run() drives everything on the calling thread; RequestStop() from any thread.
#pragma once

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "agent/inventory.h"
#include "agent/node_probes.h"
#include "agent/run_executor.h"
#include "agent/serving_engine.h"
#include "agent/spool.h"
#include "common/status.h"

namespace servesweep::agent {

struct AgentSettings {
  std::string connect;   // coordinator endpoint, e.g. tcp://10.0.0.1:5555
  std::string agent_id;  // default: the hostname
  std::string address;   // how other agents reach this node
  std::string spool_dir;
  std::string work_dir;  // engine logs
  uint32_t emulated_gpus = 0;
  std::string pool;          // node pool for disaggregated layouts ("prefill", "decode")
  NodeProbeSettings probes;  // what the pre-flight probes report (emulated GPUs)
  int heartbeat_ms = 1000;
  int liveness = 3;
  int reconnect_initial_ms = 250;
  int reconnect_max_ms = 32000;
  int resend_after_ms = 10000;  // resend an unacknowledged result after this long
  bool exit_on_bye = true;
  // Hand each run's engine command lines to the engine's own argument handling before starting
  // it, where the engine is installed (engines/engine_check.h); off: --skip-engine-check.
  bool engine_check = true;
  // CurveZMQ: the coordinator's public key and this agent's keypair. Required unless `insecure`
  // asks for plain TCP explicitly.
  std::string curve_server_z85;
  std::string curve_public_z85;
  std::string curve_secret_z85;
  bool insecure = false;
};

class Agent {
 public:
  Agent(AgentSettings settings, zmq::context_t& context);
  ~Agent();
  // Returns when the coordinator says bye (exit_on_bye; a bye that says another sweep follows
  // keeps it) or on RequestStop().
  Status Run();
  void RequestStop() { stop_.store(true); }

 private:
  struct Outgoing {
    std::string run_id;
    uint32_t attempt = 0;
    std::unique_ptr<capnp::MallocMessageBuilder> result;
    int64_t sent_ns = 0;
  };

  void Connect();
  void SendHello();
  void SendResult(Outgoing& outgoing, int64_t now_ns);
  void SendHeartbeat();
  // The configuration of the engine kept for the next run, "" for none (hello, heartbeats).
  std::string WarmConfiguration() const;
  void SendProgress();
  // A multi-node run's energy reads: the head's asks, a worker's answers (agent/peer_energy.h).
  void SendEnergyMessages();
  // Whether this agent runs (run_id, attempt) in `role` now: a multi-node run's energy messages
  // of another run or attempt are dropped.
  bool Holds(schema::Role role, const std::string& run_id, uint32_t attempt) const;
  bool Send(capnp::MallocMessageBuilder& message);
  // What a coordinator's message asked of the loop.
  struct Asked {
    bool bye = false;   // the sweep is over
    bool stay = false;  // ... and another follows on this endpoint: stay, keep the engine
  };
  void Handle(const zmq::message_t& frame, Asked* asked);
  // Stops the kept engine off the loop's thread (heartbeats go on); a run waits for it.
  void RetireKeptEngine(const std::string& why);
  bool Retiring() const;
  void OnAssign(schema::Assign::Reader assign);
  void StartRun(schema::Assign::Reader assign);
  // Answers an assignment we cannot take with a failed result (not spooled: nothing measured).
  void RefuseAssignment(schema::Assign::Reader assign, const std::string& why);
  void CollectFinishedRun(int64_t now_ns);
  // Pre-flight probes run on their own thread (they take seconds); the report goes when done.
  void StartProbes(uint32_t repeats);
  void CollectProbeReport();
  void LoadSpool();

  AgentSettings settings_;
  zmq::context_t& context_;
  zmq::socket_t socket_;
  Spool spool_;
  std::unique_ptr<RunExecutor> executor_;
  // The engine kept up since the last run for the next run of its configuration
  // (engine_lifecycle per_configuration); handed to that run's executor, stopped at bye (not
  // at one that says another sweep follows) or when the coordinator releases it.
  std::unique_ptr<ServingEngine> kept_engine_;
  std::future<void> retiring_;                                  // a released engine being stopped
  std::unique_ptr<capnp::MallocMessageBuilder> queued_assign_;  // waits for a released run to end
  std::map<std::string, Outgoing> outgoing_;  // key: run_id + "." + attempt; awaiting ack
  std::thread probe_thread_;
  std::atomic<bool> probe_done_{false};
  std::unique_ptr<capnp::MallocMessageBuilder> probe_message_;
  std::unique_ptr<capnp::MallocMessageBuilder> inventory_message_;  // taken at the first hello
  std::string gpu_model_;
  std::string interconnect_;
  std::string progress_phase_sent_;  // the phase of the last progress report
  std::atomic<bool> stop_{false};
};

}  // namespace servesweep::agent
