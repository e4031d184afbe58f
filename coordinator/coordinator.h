// The coordinator: owns a sweep's results database, listens on a ZeroMQ ROUTER socket, places
// pending runs on idle agents, tracks agents' liveness with heartbeats both ways (Paranoid
// Pirate), commits results and acknowledges them, and re-queues the runs of lost agents.
// Sweep state lives in the database, so a restarted coordinator (resume) continues where the
// last one stopped.
//
// Thread-safety: Run() drives everything on the calling thread; RequestStop() may be called
// from any thread (and from a signal handler through the flag it sets).
#pragma once

#include <capnp/message.h>
#include <kj/array.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/status.h"
#include "coordinator/agent_registry.h"
#include "coordinator/zap_handler.h"
#include "matrix/load_ladder.h"
#include "matrix/matrix_loader.h"
#include "results/results_store.h"

namespace servesweep::coordinator {

class ProgressDisplay;

struct CoordinatorSettings {
  std::string bind = "tcp://127.0.0.1:5555";  // "tcp://127.0.0.1:*" picks a free port
  std::string out_dir;
  bool resume = false;
  int heartbeat_ms = 1000;
  int liveness = 3;                     // heartbeat intervals of silence before an agent is lost
  int agent_wait_warn_s = 30;           // warn when pending runs wait this long for agents
  size_t max_frame_bytes = 256u << 20;  // larger frames are refused by the socket itself
  // Group commit: results per SQLite transaction. A batch commits when it holds this many
  // results or at the end of a turn of the loop (at most a quarter heartbeat, 50 ms), and its
  // acks go out only after that commit. 1: one transaction per result, acked at once.
  int commit_batch_max = 256;
  // CurveZMQ: the coordinator's secret key and the agents it admits (through a ZAP handler).
  // Both are required unless `insecure` asks for plain TCP explicitly.
  std::string curve_secret_z85;
  std::vector<std::string> allowed_agent_keys_z85;
  bool insecure = false;
  // Another sweep follows on this endpoint with the same agents (a search's next round): each
  // agent keeps the engine of its last run for it (per_configuration), and the bye says stay.
  bool next_sweep_follows = false;
  // The sweep does not end before this many agents have said hello, or wait_for_agents_ms has
  // passed since Run() began: the empty sweep after a search's last round tells the agents its
  // rounds kept, started elsewhere (Slurm, Kubernetes), that nothing follows (a bye without
  // stay), so they stop their engines and leave instead of waiting for a next coordinator.
  size_t wait_for_agents = 0;
  int wait_for_agents_ms = 0;
  // Where runs' progress is shown (not owned; may be null): assignments, the agents' progress
  // reports and the ends of attempts.
  ProgressDisplay* progress = nullptr;
};

struct SweepTotals {
  size_t runs = 0, done = 0, failed = 0, skipped = 0, pending = 0, running = 0;
  size_t duplicates_dropped = 0;  // results received for runs already committed
  size_t frames_rejected = 0;     // malformed or unexpected frames dropped
  size_t impostors_refused = 0;   // messages under an agent id bound to another public key
};

class Coordinator {
 public:
  Coordinator(CoordinatorSettings settings, zmq::context_t& context);
  ~Coordinator();

  // Opens or creates out_dir/results.db and records (or, with resume, checks) the sweep.
  Status Prepare(matrix::LoadedMatrix& matrix);
  // Binds the ROUTER socket; endpoint() then names the real address (wildcard port resolved).
  // With CURVE keys, starts the ZAP handler first; without them, refuses unless `insecure`.
  Status Bind();
  const std::string& endpoint() const { return endpoint_; }
  // Serves until every run is done or failed (then says bye to the agents) or a stop request.
  Status Run();
  void RequestStop() { stop_.store(true); }
  SweepTotals Totals() const;
  results::ResultsStore& store() { return *store_; }

 private:
  struct RunSlot {
    std::string run_id;
    uint32_t index = 0;
    std::string label;
    kj::Array<capnp::word> spec_words;  // a serialised schema::RunSpec, word-aligned
    results::RunState state = results::RunState::kPending;
    uint32_t attempts = 0;
    uint32_t max_attempts = 3;
    std::vector<std::string> placement;  // agent ids of the current attempt, head first
    int64_t hold_until_ns = 0;           // not dispatched before: a result may be on its way
    std::string configuration;           // the spec's engineConfiguration
    std::string ladder;                  // matrix::LoadLadderOf(spec)
    matrix::LoadLevel level;
    bool keep_engine = false;  // the current attempt's agents keep its engine after it
  };

  Status CheckSecurity() const;
  // `peer_key`: the sender's CurveZMQ public key (Z85, the ZAP User-Id); "" without CURVE.
  void HandleFrame(const std::string& identity, const zmq::message_t& payload,
                   const std::string& peer_key, int64_t now_ns);
  // Places `run` on `placement` (head first), sends every rank its assignment, and takes the
  // agents out of *idle.
  void AssignRun(RunSlot& run, schema::RunSpec::Reader spec,
                 const std::vector<std::string>& placement, int64_t now_ns,
                 std::vector<const AgentEntry*>* idle);
  // Whether the run's engine stays up after it: per_configuration, and another run of its
  // configuration is pending (or a next sweep follows).
  bool KeepsEngine(const RunSlot& run, schema::RunSpec::Reader spec) const;
  // Whether a run of `configuration` other than `besides` (may be null) waits to be placed.
  bool AnyPendingRunOf(const std::string& configuration, const RunSlot* besides) const;
  void OnHello(const std::string& identity, schema::Hello::Reader hello,
               const std::string& peer_key, int64_t now_ns);
  // False (and the message is to be dropped) when `identity` is bound to another key.
  bool KeyMatchesIdentity(const std::string& identity, const std::string& peer_key);
  void OnResult(const std::string& identity, schema::RunResult::Reader result);
  // `saturated` ended over-saturated: its ladder's pending runs above its level are recorded as
  // skipped (RunStatus::SKIPPED, the reason in their error), never dispatched.
  void SkipLevelsAbove(const RunSlot& saturated, const std::string& evidence);
  void OnProbeReport(const std::string& identity, schema::ProbeReport::Reader report);
  // A multi-node run's energy reads (agent/peer_energy.h): the head's ask to its other agents,
  // their answers to the head.
  void ForwardEnergy(const std::string& identity, schema::Envelope::Reader envelope);
  void RequestProbes();
  void LoseAgent(const std::string& id, const std::string& why);
  // Ends the current attempt of a run without a committed result; retries or fails it.
  void EndAttempt(RunSlot& run, const std::string& outcome, const std::string& error);
  // `keep_engine`: the run was committed and its agents keep the engine (Cancel.keepEngine);
  // else a run of several agents stops every part, and the group starts afresh next time.
  void ReleasePlacement(RunSlot& run, const std::string& reason, const std::string& except_id,
                        bool keep_engine = false);
  void Dispatch(int64_t now_ns);
  // Tells the progress display (if any) that `run`'s current attempt is placed.
  void ShowAssigned(const RunSlot& run, int64_t now_ns);
  void SendHeartbeats();
  bool Send(const std::string& identity, capnp::MallocMessageBuilder& message);
  bool SendFrame(const std::string& identity, zmq::message_t& frame);
  // Commits the open batch, then sends the acks that waited for it. An error stops the sweep:
  // nothing of the batch was acknowledged, so the agents still hold every result.
  Status FlushBatch();
  RunSlot* FindRun(const std::string& run_id);
  bool AllFinished() const;
  // Tells idle agents to stop kept engines no run of this sweep will use.
  void ReleaseUnneededEngines(const std::vector<const AgentEntry*>& idle);
  // Every agent: the sweep is over (and whether another follows: next_sweep_follows).
  void SayBye();

  CoordinatorSettings settings_;
  zmq::context_t& context_;
  std::unique_ptr<ZapHandler> zap_;  // CURVE only; answers before the socket admits anyone
  zmq::socket_t socket_;
  std::string endpoint_;
  std::unique_ptr<results::ResultsStore> store_;
  std::vector<RunSlot> runs_;
  std::map<std::string, size_t> run_index_;
  // Indices into runs_ by engine configuration: the runs one kept engine may serve.
  std::map<std::string, std::vector<size_t>> runs_of_configuration_;
  // A configuration on several agents: where its engine is kept up (the last placement whose
  // run kept it, head first); its next run goes there, on those agents in that order.
  std::map<std::string, std::vector<std::string>> kept_group_of_;
  // Indices into runs_ by load ladder: the levels an over-saturated one skips.
  std::map<std::string, std::vector<size_t>> runs_of_ladder_;
  AgentRegistry agents_;
  std::atomic<bool> stop_{false};
  size_t duplicates_dropped_ = 0;
  size_t frames_rejected_ = 0;
  size_t impostors_refused_ = 0;
  bool group_commit_ = false;
  size_t results_in_batch_ = 0;
  std::vector<std::pair<std::string, zmq::message_t>> deferred_acks_;  // sent after the commit
  // Agent id -> the public key it was first seen with (persisted in results.db): another
  // admitted key cannot take over an id, whatever routing id it claims.
  std::map<std::string, std::string> agent_keys_;
  std::set<std::pair<std::string, std::string>> impostors_logged_;  // (id, key): say it once
  int64_t waiting_since_ns_ = 0;
  bool dispatch_needed_ = true;
  bool probes_enabled_ = false;
  bool exclude_unhealthy_ = false;
  uint32_t probe_repeats_ = 5;
  int64_t next_dispatch_ns_ = 0;
};

}  // namespace servesweep::coordinator
