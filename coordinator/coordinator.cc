#include "coordinator/coordinator.h"

#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/clock.h"
#include "coordinator/placement.h"
#include "coordinator/progress_display.h"
#include "transport/envelope_codec.h"
#include "transport/socket_poll.h"

namespace servesweep::coordinator {
namespace {

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : " ") + id;
  return out;
}

kj::Array<capnp::word> CopyToWords(const std::string& bytes) {
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), words.size() * sizeof(capnp::word));
  return words;
}

}  // namespace

Coordinator::Coordinator(CoordinatorSettings settings, zmq::context_t& context)
    : settings_(std::move(settings)), context_(context) {}

Coordinator::~Coordinator() = default;

Status Coordinator::Prepare(matrix::LoadedMatrix& matrix) {
  // Refused before the output folder is touched, so a retry with keys needs no --resume.
  if (Status s = CheckSecurity(); !s.ok()) return s;
  std::error_code error;
  std::filesystem::create_directories(settings_.out_dir, error);
  if (error) {
    return Status::Internal(
        fmt::format("{}: cannot create the output folder: {}", settings_.out_dir, error.message()));
  }
  const std::string db_path = settings_.out_dir + "/results.db";
  Status status = results::ResultsStore::Open(db_path, &store_);
  if (!status.ok()) return status;

  std::string stored_hash;
  if (status = store_->SweepHash(&stored_hash); !status.ok()) return status;
  const std::string hash = matrix.matrix().getSourceHash();
  if (stored_hash.empty()) {
    if (status = store_->InitSweep(matrix.matrix(), matrix.text); !status.ok()) return status;
  } else if (!settings_.resume) {
    return Status::AlreadyExists(fmt::format(
        "{}: already holds a sweep; expected an empty output folder, or --resume to finish that "
        "sweep (nothing was changed)",
        db_path));
  } else if (stored_hash != hash) {
    return Status::AlreadyExists(fmt::format(
        "{}: holds a sweep of another matrix (hash {}); expected the matrix it was started with, "
        "found {} with hash {} (nothing was changed)",
        db_path, stored_hash, matrix.matrix().getSourcePath().cStr(), hash));
  } else {
    int requeued = 0;
    if (status = store_->RequeueInterrupted(&requeued); !status.ok()) return status;
    spdlog::info("resuming the sweep in {}: {} interrupted run(s) back to pending", db_path,
                 requeued);
  }

  if (status = store_->LoadAgentKeys(&agent_keys_); !status.ok()) return status;
  // A binding holds while its key is admitted: `servesweep run` and Slurm jobs make new keys for
  // each start, so after --resume the same ids come back with keys of their own.
  for (auto it = agent_keys_.begin(); it != agent_keys_.end();) {
    const auto& allowed = settings_.allowed_agent_keys_z85;
    if (std::find(allowed.begin(), allowed.end(), it->second) != allowed.end()) {
      ++it;
      continue;
    }
    spdlog::info("agent id '{}' was bound to key {}, no longer on the allow-list: it binds anew",
                 it->first, it->second);
    it = agent_keys_.erase(it);
  }

  const auto probes = matrix.matrix().getProbes();
  probes_enabled_ = probes.getEnabled();
  exclude_unhealthy_ = probes.getExcludeUnhealthy();
  probe_repeats_ = probes.getRepeats();

  std::vector<results::StoredRun> stored;
  if (status = store_->LoadRuns(&stored); !status.ok()) return status;
  // Runs interrupted by the restart wait a little: their agents may reconnect and be adopted, or
  // resend a result they finished while we were gone.
  const int64_t hold_until_ns =
      SteadyNowNs() + int64_t{settings_.heartbeat_ms} * 1'000'000 * settings_.liveness * 2;
  runs_.clear();
  run_index_.clear();
  runs_of_configuration_.clear();
  runs_of_ladder_.clear();
  for (auto& s : stored) {
    RunSlot slot;
    slot.run_id = s.run_id;
    slot.index = s.index;
    slot.label = s.label;
    slot.spec_words = CopyToWords(s.spec_bytes);
    slot.state = s.state;
    slot.attempts = s.attempts;
    if (s.state == results::RunState::kPending && s.attempts > 0)
      slot.hold_until_ns = hold_until_ns;
    kj::Maybe<kj::Exception> corrupt = kj::runCatchingExceptions([&]() {
      capnp::FlatArrayMessageReader reader(slot.spec_words);
      const auto spec = reader.getRoot<schema::RunSpec>();
      slot.max_attempts = std::max<uint32_t>(1, spec.getMaxAttempts());
      slot.configuration = spec.getEngineConfiguration();
      slot.ladder = matrix::LoadLadderOf(spec);
      slot.level = matrix::LoadLevelOf(spec);
    });
    if (corrupt != nullptr) {
      return Status::Internal(
          fmt::format("{}: the stored spec of run {} is unreadable", db_path, slot.run_id));
    }
    run_index_[slot.run_id] = runs_.size();
    runs_of_configuration_[slot.configuration].push_back(runs_.size());
    runs_of_ladder_[slot.ladder].push_back(runs_.size());
    runs_.push_back(std::move(slot));
  }
  return Status::Ok();
}

Status Coordinator::CheckSecurity() const {
  const bool curve = !settings_.curve_secret_z85.empty();
  if (!curve && !settings_.insecure) {
    return Status::InvalidArgument(
        "no CurveZMQ keys: expected --secret-key and --allowed-keys (make them with `servesweep "
        "keygen`), or --insecure to accept unauthenticated, unencrypted agents (nothing was "
        "changed)");
  }
  if (curve && settings_.allowed_agent_keys_z85.empty()) {
    return Status::InvalidArgument(
        "no agent public keys to admit: expected --allowed-keys with at least one key");
  }
  return Status::Ok();
}

Status Coordinator::Bind() {
  if (Status s = CheckSecurity(); !s.ok()) return s;
  const bool curve = !settings_.curve_secret_z85.empty();
  if (curve) {
    zap_ = std::make_unique<ZapHandler>(context_, settings_.allowed_agent_keys_z85);
    if (Status s = zap_->Start(); !s.ok()) return s;
  }
  try {
    socket_ = zmq::socket_t(context_, zmq::socket_type::router);
    if (curve) {
      socket_.set(zmq::sockopt::curve_server, 1);
      socket_.set(zmq::sockopt::curve_secretkey, settings_.curve_secret_z85);
      socket_.set(zmq::sockopt::zap_domain, "servesweep");
    }
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::router_mandatory, 1);  // unroutable sends fail loudly
    socket_.set(zmq::sockopt::router_handover, 1);   // a reconnecting agent takes its id back
    socket_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(settings_.max_frame_bytes));
    socket_.set(zmq::sockopt::sndhwm, 100000);
    socket_.set(zmq::sockopt::rcvhwm, 100000);
    socket_.bind(settings_.bind);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Internal(
        fmt::format("cannot bind the coordinator to {}: {}", settings_.bind, e.what()));
  }
  if (curve) {
    spdlog::info("coordinator listening on {} (CurveZMQ; {} agent key(s) admitted)", endpoint_,
                 settings_.allowed_agent_keys_z85.size());
  } else {
    spdlog::warn(
        "coordinator listening on {} over plain TCP (--insecure): agents are not authenticated "
        "and traffic is not encrypted; anyone who reaches this port can join the sweep",
        endpoint_);
  }
  return Status::Ok();
}

Coordinator::RunSlot* Coordinator::FindRun(const std::string& run_id) {
  auto it = run_index_.find(run_id);
  return it == run_index_.end() ? nullptr : &runs_[it->second];
}

bool Coordinator::Send(const std::string& identity, capnp::MallocMessageBuilder& message) {
  zmq::message_t frame = EncodeFrame(message);
  return SendFrame(identity, frame);
}

bool Coordinator::SendFrame(const std::string& identity, zmq::message_t& frame) {
  try {
    if (!socket_.send(zmq::buffer(identity),
                      zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return false;
    }
    return socket_.send(frame, zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    spdlog::warn("send to agent {} failed: {}", identity, e.what());
    return false;
  }
}

Status Coordinator::FlushBatch() {
  if (!group_commit_) return Status::Ok();
  if (Status s = store_->CommitBatch(); !s.ok()) {
    return Status::Internal(fmt::format(
        "could not commit {} result(s) to {}/results.db: {}; none was acknowledged, so the agents "
        "keep them in their spools: fix the cause and start again with --resume",
        results_in_batch_, settings_.out_dir, s.message()));
  }
  for (auto& [identity, frame] : deferred_acks_) SendFrame(identity, frame);
  deferred_acks_.clear();
  results_in_batch_ = 0;
  return Status::Ok();
}

Status Coordinator::Run() {
  const int64_t interval_ns = int64_t{settings_.heartbeat_ms} * 1'000'000;
  group_commit_ = settings_.commit_batch_max > 1;
  int64_t next_heartbeat_ns = 0;
  const auto poll_timeout =
      std::chrono::milliseconds(std::clamp(settings_.heartbeat_ms / 4, 1, 50));
  const int64_t stop_waiting_for_agents_ns =
      SteadyNowNs() + int64_t{settings_.wait_for_agents_ms} * 1'000'000;
  while (!stop_.load()) {
    bool readable = false;
    if (Status s = PollReadable(socket_, poll_timeout, &readable); !s.ok()) return s;
    // Each result is a synchronous commit: a burst of them must not hold back heartbeats and
    // dispatch (the soak benchmark saw heartbeat gaps of several seconds with 1,000 agents).
    const int64_t batch_deadline_ns =
        SteadyNowNs() + std::chrono::duration_cast<std::chrono::nanoseconds>(poll_timeout).count();
    bool drained = false;  // every message that arrived was handled
    if (group_commit_) store_->BeginBatch();
    for (int budget = 0; budget < 10000 && SteadyNowNs() < batch_deadline_ns; ++budget) {
      if (group_commit_ && results_in_batch_ >= static_cast<size_t>(settings_.commit_batch_max)) {
        if (Status s = FlushBatch(); !s.ok()) return s;
        store_->BeginBatch();
      }
      std::vector<zmq::message_t> frames;
      std::optional<size_t> received;
      try {
        received =
            zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) break;
        return Status::Internal(fmt::format("receive failed: {}", e.what()));
      }
      if (!received) {
        drained = true;
        break;
      }
      if (frames.size() != 2) {
        ++frames_rejected_;
        spdlog::warn("dropped a message of {} frames: expected identity + one envelope",
                     frames.size());
        continue;
      }
      // The ZAP handler's User-Id (the peer's public key) rides on every message it sends.
      const char* user_id = zmq_msg_gets(frames[1].handle(), "User-Id");
      HandleFrame(frames[0].to_string(), frames[1], user_id ? user_id : "", SteadyNowNs());
    }
    const int64_t now_ns = SteadyNowNs();
    if (now_ns >= next_heartbeat_ns) {
      SendHeartbeats();
      next_heartbeat_ns = now_ns + interval_ns;
    }
    // Silence counts only once the queue is drained: a heartbeat still waiting behind a burst of
    // results is not silence (the soak benchmark lost live agents that way).
    for (const auto& id : drained ? agents_.SilentSince(now_ns - interval_ns * settings_.liveness)
                                  : std::vector<std::string>{}) {
      LoseAgent(id,
                fmt::format("no message for {} ms", settings_.heartbeat_ms * settings_.liveness));
    }
    if (probes_enabled_) RequestProbes();
    Dispatch(now_ns);
    if (settings_.progress) settings_.progress->Tick(now_ns);
    // The turn's writes (results, attempts, placements) become durable together; only then are
    // the results acknowledged.
    if (Status s = FlushBatch(); !s.ok()) return s;
    const bool agents_heard =
        agents_.size() >= settings_.wait_for_agents || now_ns >= stop_waiting_for_agents_ns;
    if (AllFinished() && agents_heard) {
      SayBye();
      return Status::Ok();
    }
  }
  return Status::Ok();
}

bool Coordinator::KeyMatchesIdentity(const std::string& identity, const std::string& peer_key) {
  if (peer_key.empty()) return true;  // plain TCP (--insecure): nothing to bind to
  auto bound = agent_keys_.find(identity);
  if (bound == agent_keys_.end() || bound->second == peer_key) return true;
  ++impostors_refused_;
  if (impostors_logged_.insert({identity, peer_key}).second) {
    spdlog::warn(
        "refused messages under agent id '{}' from public key {}: that id belongs to key {} "
        "(first seen with it); each agent needs its own --id, and an id stays with its key",
        identity, peer_key, bound->second);
  }
  return false;
}

void Coordinator::HandleFrame(const std::string& identity, const zmq::message_t& payload,
                              const std::string& peer_key, int64_t now_ns) {
  if (!KeyMatchesIdentity(identity, peer_key)) return;
  std::unique_ptr<DecodedEnvelope> decoded;
  Status status = DecodeFrame(payload, &decoded, settings_.max_frame_bytes);
  if (!status.ok()) {
    ++frames_rejected_;
    spdlog::warn("dropped a frame from '{}': {}", identity, status.message());
    return;
  }
  // Field access is bounds-checked lazily: a hostile message can still throw while we read it.
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() {
    auto envelope = decoded->envelope();
    const auto which = envelope.which();
    if (which == schema::Envelope::HELLO) {
      OnHello(identity, envelope.getHello(), peer_key, now_ns);
      return;
    }
    if (!agents_.Touch(identity, now_ns)) {
      // Not (or no longer) registered: it will say hello again when its liveness runs out.
      spdlog::debug("ignored a message from unregistered agent '{}'", identity);
      return;
    }
    switch (which) {
      case schema::Envelope::HEARTBEAT: {
        const auto heartbeat = envelope.getHeartbeat();
        if (agents_.Reported(identity, heartbeat.getBusyRunId())) dispatch_needed_ = true;
        if (AgentEntry* agent = agents_.Find(identity)) {
          agent->warm_configuration = heartbeat.getWarmConfiguration();
        }
        break;
      }
      case schema::Envelope::PROGRESS: {
        auto progress = envelope.getProgress();
        spdlog::debug("{}: {} {}/{} ({})", identity, progress.getRunId().cStr(),
                      progress.getCompletedRequests(), progress.getTotalRequests(),
                      progress.getPhase().cStr());
        const RunSlot* run = FindRun(progress.getRunId());
        if (settings_.progress && run && run->state == results::RunState::kRunning &&
            !run->placement.empty() && run->placement.front() == identity) {
          settings_.progress->RunReported(
              run->run_id, progress.getAttempt(), progress.getPhase().cStr(),
              progress.getCompletedRequests(), progress.getTotalRequests(), now_ns);
        }
        break;
      }
      case schema::Envelope::RESULT: {
        // One copy validates the whole result within the reader's traversal limit; the
        // commit then reads the copy as often as it likes.
        capnp::MallocMessageBuilder copy;
        copy.setRoot(envelope.getResult());
        OnResult(identity, copy.getRoot<schema::RunResult>().asReader());
        break;
      }
      case schema::Envelope::PROBE_REPORT:
        OnProbeReport(identity, envelope.getProbeReport());
        break;
      case schema::Envelope::ENERGY_MARK:
      case schema::Envelope::ENERGY_READ:
        ForwardEnergy(identity, envelope);
        break;
      case schema::Envelope::BYE:
        LoseAgent(identity, fmt::format("said bye: {}", envelope.getBye().getReason().cStr()));
        break;
      default:
        ++frames_rejected_;
        spdlog::warn(
            "dropped a message from '{}': expected hello, heartbeat, progress, result "
            "or bye from an agent, found kind {}",
            identity, static_cast<unsigned>(which));
    }
  });
  KJ_IF_MAYBE (exception, failure) {
    ++frames_rejected_;
    spdlog::warn("dropped a frame from '{}': {}", identity, exception->getDescription().cStr());
  }
}

void Coordinator::OnHello(const std::string& identity, schema::Hello::Reader hello,
                          const std::string& peer_key, int64_t now_ns) {
  auto inventory = hello.getInventory();
  if (inventory.getAgentId() != identity) {
    ++frames_rejected_;
    spdlog::warn("dropped a hello: socket identity '{}' but inventory says '{}'", identity,
                 inventory.getAgentId().cStr());
    return;
  }
  if (!peer_key.empty() && agent_keys_.emplace(identity, peer_key).second) {
    if (Status s = store_->BindAgentKey(identity, peer_key); !s.ok()) {
      spdlog::error("{}", s.message());
    }
    spdlog::info("agent id '{}' bound to public key {}", identity, peer_key);
  }
  std::string was_busy;
  if (AgentEntry* known = agents_.Find(identity)) {
    was_busy = known->busy_run_id;
    const int64_t interval_ns = int64_t{settings_.heartbeat_ms} * 1'000'000;
    if ((known->hostname != inventory.getHostname().cStr() || known->pid != inventory.getPid()) &&
        now_ns - known->last_seen_ns < interval_ns) {
      spdlog::warn(
          "agent id '{}' said hello from {} pid {} while {} pid {} was heard {} ms ago: "
          "agent ids must be unique (--id)",
          identity, inventory.getHostname().cStr(), inventory.getPid(), known->hostname, known->pid,
          (now_ns - known->last_seen_ns) / 1'000'000);
    }
  }
  dispatch_needed_ = true;
  AgentEntry& agent = agents_.Hello(inventory, now_ns);
  agent.warm_configuration = hello.getWarmConfiguration();
  if (Status s = store_->UpsertAgent(inventory); !s.ok()) spdlog::error("{}", s.message());
  spdlog::info("agent {} ({}, {} GPU{}) said hello", identity, agent.hostname, agent.gpus,
               agent.gpus == 1 ? "" : "s");

  const int64_t hold_ns = int64_t{settings_.heartbeat_ms} * 1'000'000 * settings_.liveness * 2;
  for (auto spooled : hello.getSpooledRunIds()) {
    if (RunSlot* run = FindRun(spooled); run && run->state == results::RunState::kPending) {
      run->hold_until_ns = now_ns + hold_ns;  // its result is about to be resent
    }
  }
  const std::string busy = hello.getBusyRunId();
  RunSlot* busy_run = busy.empty() ? nullptr : FindRun(busy);
  if (!was_busy.empty() && was_busy != busy) {
    // The agent restarted or dropped the run we placed on it.
    if (RunSlot* run = FindRun(was_busy); run && run->state == results::RunState::kRunning) {
      run->hold_until_ns = now_ns + hold_ns;
      EndAttempt(*run, "lost", fmt::format("agent {} reconnected without the run", identity));
    }
  }
  if (busy_run == nullptr) return;
  if (busy == was_busy) {
    agent.busy_run_id = busy;  // a reconnect in the middle of the run: keep going
    return;
  }
  // A run we did not place here (the coordinator restarted): adopt a single-agent run whose
  // attempt is the current one; release anything else.
  const bool adoptable =
      busy_run->state == results::RunState::kPending && hello.getBusyRole() == schema::Role::HEAD &&
      hello.getBusyGroupSize() == 1 && hello.getBusyAttempt() == busy_run->attempts;
  if (adoptable) {
    busy_run->state = results::RunState::kRunning;
    busy_run->placement = {identity};
    agent.busy_run_id = busy;
    if (Status s = store_->MarkRunning(busy, busy_run->attempts, identity); !s.ok()) {
      spdlog::error("{}", s.message());
    }
    spdlog::info("adopted run {} (attempt {}) still running on agent {}", busy, busy_run->attempts,
                 identity);
    ShowAssigned(*busy_run, now_ns);
    return;
  }
  capnp::MallocMessageBuilder message;
  auto cancel = NewEnvelope(message).initCancel();
  cancel.setRunId(busy);
  cancel.setAttempt(hello.getBusyAttempt());
  cancel.setReason("the coordinator restarted and re-queued this run");
  Send(identity, message);
  agent.draining_run_id = busy;
}

void Coordinator::ForwardEnergy(const std::string& identity, schema::Envelope::Reader envelope) {
  // The head's ask goes to the run's other agents, a worker's answer to the head; only within
  // the current attempt's placement, so a stale attempt's messages reach nobody.
  const bool mark = envelope.isEnergyMark();
  const std::string run_id =
      mark ? envelope.getEnergyMark().getRunId() : envelope.getEnergyRead().getRunId();
  const uint32_t attempt =
      mark ? envelope.getEnergyMark().getAttempt() : envelope.getEnergyRead().getAttempt();
  const RunSlot* run = FindRun(run_id);
  if (run == nullptr || run->state != results::RunState::kRunning || run->attempts != attempt ||
      run->placement.size() < 2) {
    return;
  }
  const auto& placement = run->placement;
  const bool from_head = placement.front() == identity;
  const bool from_worker =
      std::find(placement.begin() + 1, placement.end(), identity) != placement.end();
  capnp::MallocMessageBuilder message;
  auto forward = NewEnvelope(message);
  if (mark && from_head) {
    forward.setEnergyMark(envelope.getEnergyMark());
    for (size_t k = 1; k < placement.size(); ++k) Send(placement[k], message);
  } else if (!mark && from_worker) {
    forward.setEnergyRead(envelope.getEnergyRead());
    Send(placement.front(), message);
  }
}

void Coordinator::RequestProbes() {
  // Pre-flight: no run is placed on an agent before its probes have reported, and probes run
  // only on an agent that holds no run (they would disturb its engine).
  for (AgentEntry* agent : agents_.Unprobed()) {
    capnp::MallocMessageBuilder message;
    NewEnvelope(message).initProbe().setRepeats(probe_repeats_);
    if (Send(agent->id, message)) agent->probe_state = ProbeState::kProbing;
  }
}

void Coordinator::OnProbeReport(const std::string& identity, schema::ProbeReport::Reader report) {
  AgentEntry* agent = agents_.Find(identity);
  if (agent == nullptr) return;
  agent->probe_state = report.getHealthy() ? ProbeState::kHealthy : ProbeState::kUnhealthy;
  agent->excluded = exclude_unhealthy_ && !report.getHealthy();
  dispatch_needed_ = true;
  if (Status s = store_->StoreProbeReport(identity, report, agent->excluded); !s.ok()) {
    spdlog::error("{}", s.message());
  }
  for (auto result : report.getResults()) {
    if (result.getReason().size() > 0) {
      spdlog::warn("agent {} probe: {}", identity, result.getReason().cStr());
    }
  }
  spdlog::info("agent {} probes: {} ({}), {}{}", identity, report.getStatus().cStr(),
               report.getGpuModel().cStr(), report.getHealthy() ? "healthy" : "NOT healthy",
               agent->excluded ? "; left out of the sweep" : "");
}

void Coordinator::OnResult(const std::string& identity, schema::RunResult::Reader result) {
  const std::string run_id = result.getRunId();
  auto ack = [&](bool rejected, const std::string& reason) {
    capnp::MallocMessageBuilder message;
    auto body = NewEnvelope(message).initAck();
    body.setRunId(run_id);
    body.setAttempt(result.getAttempt());
    body.setRejected(rejected);
    body.setReason(reason);
    // In a group commit even a duplicate's ack waits: the commit it duplicates may be in this
    // very batch, not yet durable.
    if (group_commit_) {
      deferred_acks_.emplace_back(identity, EncodeFrame(message));
    } else {
      Send(identity, message);
    }
  };
  RunSlot* run = FindRun(run_id);
  if (run == nullptr) {
    ++frames_rejected_;
    spdlog::warn("result for unknown run '{}' from agent {}: not part of this sweep; rejected",
                 run_id, identity);
    ack(true, fmt::format("run {} is not part of sweep {}", run_id, settings_.out_dir));
    return;
  }
  dispatch_needed_ = true;
  AgentEntry* agent = agents_.Find(identity);
  auto agent_done = [&]() {
    if (agent && agent->busy_run_id == run_id) agent->busy_run_id.clear();
  };
  const bool current =
      run->state == results::RunState::kRunning && result.getAttempt() == run->attempts;
  const std::string error = result.getError();

  if (result.getStatus() == schema::RunStatus::BUSY) {
    // Nothing was measured: re-queue without spending an attempt; the agent's heartbeats tell
    // when it is free again.
    if (current) {
      if (Status s = store_->EndAttempt(run_id, run->attempts, "refused", error, false); !s.ok()) {
        spdlog::error("{}", s.message());
      }
      --run->attempts;
      run->state = results::RunState::kPending;
      ReleasePlacement(*run, "assignment refused by " + identity, identity);
      if (settings_.progress) {
        settings_.progress->RunEnded(run_id, "refused by " + identity + ", re-queued",
                                     SteadyNowNs());
      }
    }
    if (agent) agent->draining_run_id = "(refused " + run_id + ")";
    spdlog::warn("agent {} refused run {}: {}", identity, run_id, error);
    return;
  }
  if (run->state == results::RunState::kDone && result.getStatus() != schema::RunStatus::OK) {
    // A late failure report of an attempt that lost the race (a stalled agent's, say): history of
    // that attempt only; the run keeps its committed result.
    if (Status s = store_->EndAttempt(run_id, result.getAttempt(), "failed", error, false);
        !s.ok()) {
      spdlog::error("{}", s.message());
      return;
    }
    spdlog::info("run {} is done; kept the late failure report of attempt {} from {} as history",
                 run_id, result.getAttempt(), identity);
    agent_done();
    ack(false, "");
    return;
  }
  if (run->state == results::RunState::kDone) {
    ++duplicates_dropped_;
    spdlog::info("dropped a duplicate result for {} (attempt {}) from {}", run_id,
                 result.getAttempt(), identity);
    agent_done();
    ack(false, "");
    return;
  }
  if (result.getStatus() == schema::RunStatus::OK) {
    bool duplicate = false;
    ++results_in_batch_;
    if (Status s = store_->CommitResult(result, true, &duplicate); !s.ok()) {
      // Not acked: the agent resends, and the run stays placed until then.
      spdlog::error("could not commit the result of {}: {}", run_id, s.message());
      return;
    }
    if (duplicate) ++duplicates_dropped_;
    run->state = results::RunState::kDone;
    agent_done();
    ReleasePlacement(*run, current ? "run finished" : "a result of another attempt was committed",
                     identity, current && run->keep_engine);
    spdlog::info("run {} [{}] done by {} (attempt {})", run_id, run->label, identity,
                 result.getAttempt());
    if (settings_.progress) {
      settings_.progress->RunEnded(run_id, "done", SteadyNowNs(), result.getRequests().size());
    }
    if (result.getRecord().getStopped() == schema::StopReason::OVERSATURATED) {
      SkipLevelsAbove(*run, result.getRecord().getStopEvidence());
    }
    ack(false, "");
    return;
  }
  if (!current) {
    // A late report about an attempt that already ended: history only.
    if (Status s = store_->EndAttempt(run_id, result.getAttempt(), "failed", error, false);
        !s.ok()) {
      spdlog::error("{}", s.message());
      return;
    }
  } else if (run->attempts < run->max_attempts &&
             result.getStatus() != schema::RunStatus::REFUSED) {
    agent_done();
    EndAttempt(*run, "failed", error);
  } else {
    // The last attempt, or a permanent error (refused: the run's settings are invalid, and
    // another attempt would fail the same): the failure is the run's result.
    bool duplicate = false;
    ++results_in_batch_;
    if (Status s = store_->CommitResult(result, false, &duplicate); !s.ok()) {
      spdlog::error("could not record the failure of {}: {}", run_id, s.message());
      return;
    }
    run->state = results::RunState::kFailed;
    agent_done();
    ReleasePlacement(*run, "run failed", identity);
    const bool refused = result.getStatus() == schema::RunStatus::REFUSED;
    spdlog::warn("run {} [{}] {} after {} attempt(s): {}", run_id, run->label,
                 refused ? "refused (invalid settings, not retried)" : "failed", run->attempts,
                 error);
    if (settings_.progress) {
      settings_.progress->RunEnded(run_id, refused ? "refused" : "failed", SteadyNowNs());
    }
  }
  agent_done();
  ack(false, "");
}

void Coordinator::SkipLevelsAbove(const RunSlot& saturated, const std::string& evidence) {
  const auto of = runs_of_ladder_.find(saturated.ladder);
  if (of == runs_of_ladder_.end()) return;
  const std::string level = matrix::DescribeLoadLevel(saturated.level);
  for (size_t i : of->second) {
    RunSlot& run = runs_[i];
    if (run.state != results::RunState::kPending || !matrix::IsAbove(run.level, saturated.level)) {
      continue;
    }
    capnp::MallocMessageBuilder message;
    auto result = message.initRoot<schema::RunResult>();
    result.setRunId(run.run_id);
    result.setAttempt(run.attempts);
    result.setStatus(schema::RunStatus::SKIPPED);
    result.setError(matrix::SkippedBecause(saturated.level, saturated.run_id, evidence));
    capnp::FlatArrayMessageReader spec(run.spec_words);
    result.setSpec(spec.getRoot<schema::RunSpec>());
    const int64_t now_ms = UnixNowMs();
    result.setStartedAtUnixMs(now_ms);
    result.setFinishedAtUnixMs(now_ms);
    bool duplicate = false;
    ++results_in_batch_;
    if (Status s = store_->CommitResult(result, false, &duplicate); !s.ok()) {
      spdlog::error("could not record run {} as skipped: {}", run.run_id, s.message());
      continue;  // it stays pending and runs: nothing is lost
    }
    run.state = results::RunState::kSkipped;
    spdlog::info("run {} [{}] skipped: {} ({}) was over-saturated", run.run_id, run.label, level,
                 saturated.run_id);
    if (settings_.progress) settings_.progress->RunEnded(run.run_id, "skipped", SteadyNowNs());
  }
}

void Coordinator::EndAttempt(RunSlot& run, const std::string& outcome, const std::string& error) {
  const bool final = run.attempts >= run.max_attempts;
  if (Status s = store_->EndAttempt(run.run_id, run.attempts, outcome, error, final); !s.ok()) {
    spdlog::error("{}", s.message());
  }
  run.state = final ? results::RunState::kFailed : results::RunState::kPending;
  ReleasePlacement(run, "attempt ended: " + error, "");
  if (settings_.progress) {
    settings_.progress->RunEnded(run.run_id, final ? "failed" : outcome + ", re-queued",
                                 SteadyNowNs());
  }
  if (final) {
    spdlog::warn("run {} [{}] failed after {} attempt(s): {}", run.run_id, run.label, run.attempts,
                 error);
  } else {
    spdlog::warn("run {} [{}] attempt {} {}: {}; re-queued", run.run_id, run.label, run.attempts,
                 outcome, error);
  }
}

void Coordinator::ReleasePlacement(RunSlot& run, const std::string& reason,
                                   const std::string& except_id, bool keep_engine) {
  if (!keep_engine && run.placement.size() > 1) {
    // The group's parts stop (or were never kept): none of them is warm any more.
    const auto kept = kept_group_of_.find(run.configuration);
    if (kept != kept_group_of_.end() && kept->second == run.placement) kept_group_of_.erase(kept);
    for (const auto& id : run.placement) {
      if (AgentEntry* agent = agents_.Find(id)) agent->warm_configuration.clear();
    }
  }
  for (const auto& id : run.placement) {
    AgentEntry* agent = agents_.Find(id);
    if (agent == nullptr || agent->busy_run_id != run.run_id) continue;
    agent->busy_run_id.clear();
    if (id == except_id) continue;
    agent->draining_run_id = run.run_id;  // idle again once its heartbeat says so
    capnp::MallocMessageBuilder message;
    auto cancel = NewEnvelope(message).initCancel();
    cancel.setRunId(run.run_id);
    cancel.setAttempt(run.attempts);
    cancel.setReason(reason);
    cancel.setKeepEngine(keep_engine);
    Send(id, message);
  }
  run.placement.clear();
  dispatch_needed_ = true;
}

void Coordinator::LoseAgent(const std::string& id, const std::string& why) {
  AgentEntry* agent = agents_.Find(id);
  if (agent == nullptr) return;
  const std::string busy = agent->busy_run_id;
  spdlog::warn("agent {} lost: {}", id, why);
  agents_.Remove(id);
  dispatch_needed_ = true;
  if (RunSlot* run = busy.empty() ? nullptr : FindRun(busy);
      run && run->state == results::RunState::kRunning) {
    EndAttempt(*run, "lost", fmt::format("agent {} lost: {}", id, why));
  }
}

void Coordinator::Dispatch(int64_t now_ns) {
  // Placement walks every pending run: do it when something changed, a hold expired, or once a
  // second, not on every turn of the loop.
  constexpr int64_t kRecheckNs = 1'000'000'000;
  if (!dispatch_needed_ && now_ns < next_dispatch_ns_) return;
  dispatch_needed_ = false;
  next_dispatch_ns_ = now_ns + kRecheckNs;
  bool waiting = false;
  auto idle = agents_.Idle(probes_enabled_);
  ReleaseUnneededEngines(idle);
  // A group of agents that keeps an engine up takes the next pending run of its configuration
  // first, on the same agents in the same order; then so does a lone agent: the runs of one
  // configuration follow each other on one engine.
  for (const auto& [configuration, group] : std::map(kept_group_of_)) {
    const bool ready = std::all_of(group.begin(), group.end(), [&](const std::string& id) {
      return std::any_of(idle.begin(), idle.end(), [&](const AgentEntry* a) {
        return a->id == id && a->warm_configuration == configuration;
      });
    });
    const auto of = runs_of_configuration_.find(configuration);
    if (!ready || of == runs_of_configuration_.end()) continue;
    for (const size_t i : of->second) {
      RunSlot& run = runs_[i];
      if (run.state != results::RunState::kPending || run.hold_until_ns > now_ns) continue;
      capnp::FlatArrayMessageReader reader(run.spec_words);
      AssignRun(run, reader.getRoot<schema::RunSpec>(), group, now_ns, &idle);
      break;
    }
  }
  for (const AgentEntry* agent : std::vector<const AgentEntry*>(idle)) {
    const auto of = runs_of_configuration_.find(agent->warm_configuration);
    if (agent->warm_configuration.empty() || of == runs_of_configuration_.end()) continue;
    for (const size_t i : of->second) {
      RunSlot& run = runs_[i];
      if (run.state != results::RunState::kPending || run.hold_until_ns > now_ns) continue;
      capnp::FlatArrayMessageReader reader(run.spec_words);
      const auto spec = reader.getRoot<schema::RunSpec>();
      if (auto placement = PlaceRun(spec, {agent})) {
        AssignRun(run, spec, *placement, now_ns, &idle);
        break;
      }
    }
  }
  for (auto& run : runs_) {
    if (run.state != results::RunState::kPending) continue;
    if (run.hold_until_ns > now_ns) {
      next_dispatch_ns_ = std::min(next_dispatch_ns_, run.hold_until_ns);
      continue;
    }
    if (idle.empty()) {
      waiting = true;
      break;
    }
    capnp::FlatArrayMessageReader reader(run.spec_words);
    const auto spec = reader.getRoot<schema::RunSpec>();
    auto placement = PlaceRun(spec, idle);
    if (!placement) {
      waiting = true;
      continue;
    }
    AssignRun(run, spec, *placement, now_ns, &idle);
  }
  if (!waiting) {
    waiting_since_ns_ = 0;
  } else if (waiting_since_ns_ == 0) {
    waiting_since_ns_ = now_ns;
  } else if (now_ns - waiting_since_ns_ > int64_t{settings_.agent_wait_warn_s} * 1'000'000'000) {
    const auto totals = Totals();
    size_t excluded = 0;
    for (const auto& id : agents_.Ids()) excluded += agents_.Find(id)->excluded ? 1 : 0;
    spdlog::warn(
        "{} run(s) pending and waiting for idle agents that can hold them ({} agents "
        "connected, {} left out as unhealthy)",
        totals.pending, agents_.size(), excluded);
    waiting_since_ns_ = now_ns;
  }
}

void Coordinator::AssignRun(RunSlot& run, schema::RunSpec::Reader spec,
                            const std::vector<std::string>& placement, int64_t now_ns,
                            std::vector<const AgentEntry*>* idle) {
  ++run.attempts;
  run.state = results::RunState::kRunning;
  run.placement = placement;
  if (Status s = store_->MarkRunning(run.run_id, run.attempts, JoinIds(run.placement)); !s.ok()) {
    spdlog::error("{}", s.message());
  }
  std::vector<std::string> addresses;
  for (uint32_t rank = 0; rank < run.placement.size(); ++rank) {
    agents_.Find(run.placement[rank])->busy_run_id = run.run_id;
    addresses.push_back(agents_.Find(run.placement[rank])->address);
  }
  std::erase_if(*idle, [](const AgentEntry* agent) { return !agent->busy_run_id.empty(); });
  spdlog::info("run {} [{}] attempt {} -> {}", run.run_id, run.label, run.attempts,
               JoinIds(run.placement));
  ShowAssigned(run, now_ns);
  const bool keep_engine = KeepsEngine(run, spec);
  run.keep_engine = keep_engine;
  // Several agents reuse their parts only together: every one of them kept this configuration
  // in this very placement.
  const auto kept = kept_group_of_.find(run.configuration);
  const bool reuse_group =
      run.placement.size() > 1 && kept != kept_group_of_.end() && kept->second == run.placement &&
      std::all_of(run.placement.begin(), run.placement.end(), [&](const std::string& id) {
        return agents_.Find(id)->warm_configuration == run.configuration;
      });
  if (run.placement.size() > 1) {
    if (keep_engine) {
      kept_group_of_[run.configuration] = run.placement;
    } else if (kept != kept_group_of_.end()) {
      kept_group_of_.erase(kept);
    }
  }
  // What the agents will hold after this run, before their heartbeats say so: the next run of
  // the configuration must not miss its engine because a heartbeat was in flight.
  for (const auto& id : run.placement) {
    agents_.Find(id)->warm_configuration = keep_engine ? spec.getEngineConfiguration() : "";
  }
  std::vector<std::string> unreachable;
  for (uint32_t rank = 0; rank < run.placement.size(); ++rank) {
    capnp::MallocMessageBuilder message;
    auto assign = NewEnvelope(message).initAssign();
    FillAssign(spec, run.attempts, rank, run.placement, addresses, assign);
    assign.setKeepEngine(keep_engine);
    assign.setReuseEngine(reuse_group);
    if (!Send(run.placement[rank], message)) unreachable.push_back(run.placement[rank]);
  }
  for (const auto& id : unreachable) LoseAgent(id, "unreachable when assigning");
}

bool Coordinator::KeepsEngine(const RunSlot& run, schema::RunSpec::Reader spec) const {
  if (spec.getEngineLifecycle() != schema::EngineLifecycle::PER_CONFIGURATION) return false;
  if (settings_.next_sweep_follows) return true;  // it may run there, and what may not is released
  return AnyPendingRunOf(run.configuration, &run);
}

bool Coordinator::AnyPendingRunOf(const std::string& configuration, const RunSlot* besides) const {
  // The runs of its configuration only (a handful: levels x repeats), never the whole sweep.
  const auto of = runs_of_configuration_.find(configuration);
  if (of == runs_of_configuration_.end()) return false;
  return std::any_of(of->second.begin(), of->second.end(), [&](size_t i) {
    return &runs_[i] != besides && runs_[i].state == results::RunState::kPending;
  });
}

void Coordinator::ShowAssigned(const RunSlot& run, int64_t now_ns) {
  if (!settings_.progress) return;
  capnp::FlatArrayMessageReader reader(run.spec_words);
  RunProgressView view;
  view.position = run.index + 1;
  view.runs = static_cast<uint32_t>(runs_.size());
  view.label = run.label;
  view.attempt = run.attempts;
  view.total = reader.getRoot<schema::RunSpec>().getWorkload().getNumRequests();
  settings_.progress->RunAssigned(run.run_id, std::move(view), now_ns);
}

void Coordinator::SendHeartbeats() {
  // A failed send (the peer is reconnecting) is not a loss: silence decides, as for agents.
  for (const auto& id : agents_.Ids()) {
    capnp::MallocMessageBuilder message;
    NewEnvelope(message).initHeartbeat();
    Send(id, message);
  }
}

bool Coordinator::AllFinished() const {
  return std::all_of(runs_.begin(), runs_.end(), [](const RunSlot& run) {
    return run.state == results::RunState::kDone || run.state == results::RunState::kFailed ||
           run.state == results::RunState::kSkipped;
  });
}

void Coordinator::ReleaseUnneededEngines(const std::vector<const AgentEntry*>& idle) {
  for (const AgentEntry* agent : idle) {
    const std::string& kept = agent->warm_configuration;
    if (kept.empty()) continue;
    // An engine kept by the sweep before (next_sweep_follows) whose configuration this one has
    // no run of; or, without a sweep to follow, one with no run of it left to wait for.
    const bool in_sweep = runs_of_configuration_.contains(kept);
    if (in_sweep && (settings_.next_sweep_follows || AnyPendingRunOf(kept, nullptr))) continue;
    spdlog::info("agent {}: releasing its engine (no run of this sweep needs it)", agent->id);
    capnp::MallocMessageBuilder message;
    auto release = NewEnvelope(message).initRelease();
    release.setConfiguration(kept);
    release.setReason(in_sweep ? "no run of its configuration is left"
                               : "no run of this sweep has its configuration");
    Send(agent->id, message);
    // As AssignRun does: what the agent will hold, before its heartbeat says so.
    agents_.Find(agent->id)->warm_configuration.clear();
  }
}

void Coordinator::SayBye() {
  for (const auto& id : agents_.Ids()) {
    capnp::MallocMessageBuilder message;
    auto bye = NewEnvelope(message).initBye();
    bye.setReason("sweep finished");
    bye.setStay(settings_.next_sweep_follows);
    Send(id, message);
  }
  // Give the byes time to leave before the socket closes.
  socket_.set(zmq::sockopt::linger, 1000);
}

SweepTotals Coordinator::Totals() const {
  SweepTotals totals;
  totals.runs = runs_.size();
  for (const auto& run : runs_) {
    switch (run.state) {
      case results::RunState::kDone:
        ++totals.done;
        break;
      case results::RunState::kFailed:
        ++totals.failed;
        break;
      case results::RunState::kSkipped:
        ++totals.skipped;
        break;
      case results::RunState::kRunning:
        ++totals.running;
        break;
      case results::RunState::kPending:
        ++totals.pending;
        break;
    }
  }
  totals.duplicates_dropped = duplicates_dropped_;
  totals.frames_rejected = frames_rejected_;
  totals.impostors_refused = impostors_refused_;
  return totals;
}

}  // namespace servesweep::coordinator
