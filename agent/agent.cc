#include "agent/agent.h"

#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/clock.h"
#include "transport/envelope_codec.h"
#include "transport/socket_poll.h"

namespace servesweep::agent {
namespace {

std::string Key(const std::string& run_id, uint32_t attempt) {
  return fmt::format("{}.{}", run_id, attempt);
}

constexpr int64_t kProgressEveryNs = 1'000'000'000;

}  // namespace

Agent::Agent(AgentSettings settings, zmq::context_t& context)
    : settings_(std::move(settings)), context_(context), spool_(settings_.spool_dir) {}

Agent::~Agent() {
  if (probe_thread_.joinable()) probe_thread_.join();
}

void Agent::StartProbes(uint32_t repeats) {
  if (probe_thread_.joinable()) return;  // already probing
  spdlog::info("running pre-flight probes ({} repeats)", repeats);
  probe_done_.store(false);
  probe_message_ = std::make_unique<capnp::MallocMessageBuilder>();
  NodeProbeSettings settings = settings_.probes;
  settings.emulated_gpus = settings_.emulated_gpus;
  settings.repeats = repeats;
  probe_thread_ = std::thread([this, settings] {
    RunNodeProbes(settings, NewEnvelope(*probe_message_).initProbeReport());
    probe_done_.store(true);
  });
}

void Agent::CollectProbeReport() {
  if (!probe_thread_.joinable() || !probe_done_.load()) return;
  probe_thread_.join();
  auto report = probe_message_->getRoot<schema::Envelope>().getProbeReport();
  spdlog::info("probes: {} ({}), {}", report.getStatus().cStr(), report.getGpuModel().cStr(),
               report.getHealthy() ? "healthy" : "NOT healthy");
  for (auto result : report.getResults()) {
    if (result.getReason().size() > 0) spdlog::warn("probe: {}", result.getReason().cStr());
  }
  Send(*probe_message_);
  probe_message_.reset();
}

void Agent::Connect() {
  socket_ = zmq::socket_t(context_, zmq::socket_type::dealer);
  socket_.set(zmq::sockopt::routing_id, settings_.agent_id);
  if (!settings_.curve_server_z85.empty()) {
    socket_.set(zmq::sockopt::curve_serverkey, settings_.curve_server_z85);
    socket_.set(zmq::sockopt::curve_publickey, settings_.curve_public_z85);
    socket_.set(zmq::sockopt::curve_secretkey, settings_.curve_secret_z85);
  }
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxFrameBytes));
  socket_.connect(settings_.connect);
  SendHello();
  // Everything unacknowledged goes again: the coordinator drops what it already committed.
  const int64_t now_ns = SteadyNowNs();
  for (auto& [key, outgoing] : outgoing_) SendResult(outgoing, now_ns);
}

bool Agent::Send(capnp::MallocMessageBuilder& message) {
  try {
    zmq::message_t frame = EncodeFrame(message);
    return socket_.send(frame, zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    spdlog::warn("send failed: {}", e.what());
    return false;
  }
}

void Agent::SendHello() {
  capnp::MallocMessageBuilder message;
  auto hello = NewEnvelope(message).initHello();
  // The inventory is taken once (nvidia-smi is a child process): hellos repeat every heartbeat
  // while the coordinator is away.
  if (!inventory_message_) {
    inventory_message_ = std::make_unique<capnp::MallocMessageBuilder>();
    auto inventory = inventory_message_->initRoot<schema::Inventory>();
    FillInventory({settings_.agent_id, settings_.address, settings_.emulated_gpus, settings_.pool},
                  inventory);
    gpu_model_ = inventory.getGpus().size() > 0
                     ? std::string(inventory.getGpus()[0].getName().cStr())
                     : "none";
    interconnect_ = inventory.getInterconnect().cStr();
  }
  hello.setInventory(inventory_message_->getRoot<schema::Inventory>().asReader());
  auto spooled = hello.initSpooledRunIds(static_cast<unsigned>(outgoing_.size()));
  unsigned i = 0;
  for (const auto& [key, outgoing] : outgoing_) spooled.set(i++, outgoing.run_id);
  // What we are doing for the sweep: the queued run, else a run still in progress. A cancelled
  // run is winding down and must not be adopted.
  if (queued_assign_) {
    auto queued = queued_assign_->getRoot<schema::Assign>().asReader();
    hello.setBusyRunId(queued.getSpec().getRunId());
    hello.setBusyAttempt(queued.getAttempt());
    hello.setBusyRole(queued.getRole());
    hello.setBusyGroupSize(queued.getGroupSize());
  } else if (executor_ && !executor_->Finished() && !executor_->cancelled()) {
    hello.setBusyRunId(executor_->run_id());
    hello.setBusyAttempt(executor_->attempt());
    hello.setBusyRole(executor_->role());
    hello.setBusyGroupSize(executor_->group_size());
  }
  hello.setWarmConfiguration(WarmConfiguration());
  Send(message);
}

std::string Agent::WarmConfiguration() const {
  if (kept_engine_) return kept_engine_->configuration;
  // The run in progress will keep its engine: say so already, or a heartbeat sent while it
  // runs would tell the coordinator this agent has no engine for its next run.
  if (executor_ && !executor_->cancelled()) return executor_->kept_configuration();
  return "";
}

void Agent::SendHeartbeat() {
  capnp::MallocMessageBuilder message;
  auto heartbeat = NewEnvelope(message).initHeartbeat();
  if (queued_assign_) {
    heartbeat.setBusyRunId(queued_assign_->getRoot<schema::Assign>().getSpec().getRunId());
  } else if (executor_ && !executor_->Finished()) {
    heartbeat.setBusyRunId(executor_->run_id());
  }
  heartbeat.setWarmConfiguration(WarmConfiguration());
  Send(message);
}

void Agent::SendProgress() {
  if (!executor_ || executor_->Finished()) return;
  progress_phase_sent_ = executor_->phase();
  if (executor_->role() != schema::Role::HEAD) return;  // the head reports for the run
  capnp::MallocMessageBuilder message;
  auto progress = NewEnvelope(message).initProgress();
  progress.setRunId(executor_->run_id());
  progress.setAttempt(executor_->attempt());
  progress.setPhase(progress_phase_sent_);
  progress.setCompletedRequests(executor_->completed_requests());
  progress.setTotalRequests(executor_->total_requests());
  Send(message);
}

bool Agent::Holds(schema::Role role, const std::string& run_id, uint32_t attempt) const {
  return executor_ && executor_->role() == role && executor_->run_id() == run_id &&
         executor_->attempt() == attempt;
}

void Agent::SendEnergyMessages() {
  if (!executor_) return;
  for (const uint8_t edge : executor_->peer_energy().TakeAsks()) {
    capnp::MallocMessageBuilder message;
    auto mark = NewEnvelope(message).initEnergyMark();
    mark.setRunId(executor_->run_id());
    mark.setAttempt(executor_->attempt());
    mark.setEdge(edge);
    Send(message);
  }
  for (const auto& answer : executor_->peer_energy().TakeAnswers()) {
    capnp::MallocMessageBuilder message;
    auto read = NewEnvelope(message).initEnergyRead();
    read.setRunId(executor_->run_id());
    read.setAttempt(executor_->attempt());
    ToWire(answer, read);
    Send(message);
  }
}

void Agent::SendResult(Outgoing& outgoing, int64_t now_ns) {
  capnp::MallocMessageBuilder message;
  NewEnvelope(message).setResult(outgoing.result->getRoot<schema::RunResult>().asReader());
  Send(message);
  outgoing.sent_ns = now_ns;
}

void Agent::LoadSpool() {
  for (const auto& entry : spool_.List()) {
    std::string bytes;
    if (Status s = spool_.Read(entry, &bytes); !s.ok()) {
      spdlog::error("{}", s.message());
      continue;
    }
    auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), bytes.data(), words.size() * sizeof(capnp::word));
    Outgoing outgoing;
    outgoing.run_id = entry.run_id;
    outgoing.attempt = entry.attempt;
    outgoing.result = std::make_unique<capnp::MallocMessageBuilder>();
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() {
      capnp::FlatArrayMessageReader reader(words);
      outgoing.result->setRoot(reader.getRoot<schema::RunResult>());
    });
    if (failure != nullptr) {
      spdlog::error("{}: unreadable spooled result left in place", entry.path);
      continue;
    }
    spdlog::info("found spooled result {} (attempt {}) to deliver", entry.run_id, entry.attempt);
    outgoing_[Key(entry.run_id, entry.attempt)] = std::move(outgoing);
  }
}

void Agent::OnAssign(schema::Assign::Reader assign) {
  const std::string run_id = assign.getSpec().getRunId();
  if (executor_ && !executor_->Finished() && !executor_->cancelled()) {
    // The coordinator believes we are free: refuse explicitly so it re-queues the run.
    spdlog::warn("assigned {} while busy with {}; refusing it", run_id, executor_->run_id());
    RefuseAssignment(
        assign, fmt::format("agent {} is busy with {}", settings_.agent_id, executor_->run_id()));
    return;
  }
  if ((executor_ && !executor_->Finished()) || Retiring()) {
    // A released run (or engine) is still tearing its engine down: start this one when it has
    // finished, without blocking the loop (heartbeats must go on).
    queued_assign_ = std::make_unique<capnp::MallocMessageBuilder>();
    queued_assign_->setRoot(assign);
    return;
  }
  StartRun(assign);
}

void Agent::StartRun(schema::Assign::Reader assign) {
  const std::string run_id = assign.getSpec().getRunId();
  CollectFinishedRun(SteadyNowNs());
  spdlog::info("run {} attempt {}: {} (rank {}/{})", run_id, assign.getAttempt(),
               assign.getRole() == schema::Role::HEAD ? "head" : "worker", assign.getRank(),
               assign.getGroupSize());
  ExecutorContext context{settings_.agent_id, settings_.work_dir, gpu_model_, interconnect_,
                          settings_.engine_check};
  executor_ = std::make_unique<RunExecutor>(assign, context, std::move(kept_engine_));
}

void Agent::RefuseAssignment(schema::Assign::Reader assign, const std::string& why) {
  capnp::MallocMessageBuilder message;
  auto result = NewEnvelope(message).initResult();
  result.setRunId(assign.getSpec().getRunId());
  result.setAttempt(assign.getAttempt());
  result.setAgentId(settings_.agent_id);
  result.setStatus(schema::RunStatus::BUSY);
  result.setError(why);
  result.setSpec(assign.getSpec());
  Send(message);
}

void Agent::CollectFinishedRun(int64_t now_ns) {
  if (!executor_ || !executor_->Finished()) return;
  auto result = executor_->TakeResult();
  const std::string run_id = executor_->run_id();
  const uint32_t attempt = executor_->attempt();
  kept_engine_ = executor_->TakeKeptEngine();
  executor_.reset();
  if (!result) {
    SendHeartbeat();  // a released worker: tell the coordinator at once that we are free
    return;
  }
  // Spool first: from here on a crash cannot lose the measurement.
  if (Status s = spool_.Write(run_id, attempt, *result); !s.ok()) {
    // Still delivered (at least once while this process lives): only a crash before the ack
    // would lose it now.
    spdlog::error(
        "run {} attempt {}: could not spool the result: {}; sending it from memory (lost if this "
        "agent dies before the coordinator acknowledges it)",
        run_id, attempt, s.message());
  }
  Outgoing outgoing{run_id, attempt, std::move(result), 0};
  auto root = outgoing.result->getRoot<schema::RunResult>();
  spdlog::info("run {} attempt {} finished: {}{}", run_id, attempt,
               root.getStatus() == schema::RunStatus::OK ? "ok" : "not ok",
               root.getError().size() ? std::string(" (") + root.getError().cStr() + ")" : "");
  SendResult(outgoing, now_ns);
  outgoing_[Key(run_id, attempt)] = std::move(outgoing);
}

void Agent::RetireKeptEngine(const std::string& why) {
  spdlog::info("stopping engine {} after {} run(s): {}", kept_engine_->engine_id,
               kept_engine_->runs_served, why);
  // Stopped (ServingEngine's destructor) on the task's thread, inside its body.
  retiring_ = std::async(std::launch::async,
                         [engine = std::move(kept_engine_)]() mutable { engine.reset(); });
}

bool Agent::Retiring() const {
  return retiring_.valid() &&
         retiring_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
}

void Agent::Handle(const zmq::message_t& frame, Asked* asked) {
  std::unique_ptr<DecodedEnvelope> decoded;
  if (Status s = DecodeFrame(frame, &decoded); !s.ok()) {
    spdlog::warn("dropped a frame from the coordinator: {}", s.message());
    return;
  }
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() {
    auto envelope = decoded->envelope();
    switch (envelope.which()) {
      case schema::Envelope::HEARTBEAT:
        break;
      case schema::Envelope::ASSIGN:
        OnAssign(envelope.getAssign());
        break;
      case schema::Envelope::CANCEL: {
        auto cancel = envelope.getCancel();
        if (queued_assign_ &&
            queued_assign_->getRoot<schema::Assign>().getSpec().getRunId() == cancel.getRunId()) {
          queued_assign_.reset();
        }
        const bool attempt_matches =
            cancel.getAttempt() == 0 || !executor_ || cancel.getAttempt() == executor_->attempt();
        if (executor_ && executor_->run_id() == cancel.getRunId().cStr() && attempt_matches) {
          spdlog::info("run {} released: {}{}", executor_->run_id(), cancel.getReason().cStr(),
                       cancel.getKeepEngine() ? " (keeping the engine)" : "");
          executor_->Release(cancel.getReason(), cancel.getKeepEngine());
        }
        break;
      }
      case schema::Envelope::ACK: {
        auto ack = envelope.getAck();
        const std::string run_id = ack.getRunId();
        outgoing_.erase(Key(run_id, ack.getAttempt()));
        if (ack.getRejected()) {
          spdlog::warn("coordinator rejected result {} (attempt {}): {}; kept in {}/rejected",
                       run_id, ack.getAttempt(), ack.getReason().cStr(), spool_.dir());
          if (Status s = spool_.SetAside(run_id, ack.getAttempt()); !s.ok()) {
            spdlog::error("{}", s.message());
          }
        } else {
          spool_.Remove(run_id, ack.getAttempt());
        }
        break;
      }
      case schema::Envelope::PROBE:
        StartProbes(envelope.getProbe().getRepeats());
        break;
      case schema::Envelope::BYE:
        spdlog::info("coordinator said bye: {}{}", envelope.getBye().getReason().cStr(),
                     envelope.getBye().getStay() ? " (another sweep follows: staying)" : "");
        asked->bye = true;
        asked->stay = envelope.getBye().getStay();
        break;
      case schema::Envelope::ENERGY_MARK: {
        const auto mark = envelope.getEnergyMark();
        if (Holds(schema::Role::WORKER, mark.getRunId(), mark.getAttempt())) {
          executor_->peer_energy().DeliverAsk(mark.getEdge());
        }
        break;
      }
      case schema::Envelope::ENERGY_READ: {
        const auto read = envelope.getEnergyRead();
        if (Holds(schema::Role::HEAD, read.getRunId(), read.getAttempt())) {
          executor_->peer_energy().DeliverAnswer(FromWire(read));
        }
        break;
      }
      case schema::Envelope::RELEASE: {
        const auto release = envelope.getRelease();
        if (kept_engine_ && kept_engine_->configuration == release.getConfiguration().cStr()) {
          RetireKeptEngine(release.getReason());
        }
        break;
      }
      default:
        spdlog::warn("ignored an unexpected message kind {} from the coordinator",
                     static_cast<unsigned>(envelope.which()));
    }
  });
  KJ_IF_MAYBE (exception, failure) {
    spdlog::warn("dropped a message from the coordinator: {}", exception->getDescription().cStr());
  }
}

Status Agent::Run() {
  if (settings_.curve_server_z85.empty() || settings_.curve_secret_z85.empty()) {
    if (!settings_.insecure) {
      return Status::InvalidArgument(
          "no CurveZMQ keys: expected --server-key (the coordinator's public key) and "
          "--secret-key (this agent's key, from `servesweep keygen`), or --insecure for plain "
          "TCP");
    }
    spdlog::warn(
        "connecting to {} over plain TCP (--insecure): the coordinator is not authenticated and "
        "traffic is not encrypted",
        settings_.connect);
  }
  if (Status s = spool_.Init(); !s.ok()) return s;
  LoadSpool();
  Connect();
  spdlog::info("agent {} connecting to {} ({} spooled result(s))", settings_.agent_id,
               settings_.connect, outgoing_.size());
  const int64_t interval_ns = int64_t{settings_.heartbeat_ms} * 1'000'000;
  int64_t last_heard_ns = SteadyNowNs();
  int64_t next_heartbeat_ns = last_heard_ns + interval_ns;
  int64_t next_progress_ns = last_heard_ns + kProgressEveryNs;
  int backoff_ms = settings_.reconnect_initial_ms;
  int64_t reconnect_at_ns = 0;       // > 0: the coordinator went silent; reconnect then
  bool heard_since_connect = false;  // until then every heartbeat tick says hello instead
  const auto poll_timeout =
      std::chrono::milliseconds(std::clamp(settings_.heartbeat_ms / 4, 1, 50));

  int64_t last_turn_ns = SteadyNowNs();
  while (!stop_.load()) {
    bool readable = false;
    if (Status s = PollReadable(socket_, poll_timeout, &readable); !s.ok()) return s;
    int64_t now_ns = SteadyNowNs();
    // A turn of this loop takes at most a poll timeout plus a little work. A gap as long as the
    // liveness window means this process was stopped (SIGSTOP, a frozen VM) or starved: the
    // coordinator has likely given the run to another agent, and the load generator was frozen
    // too, so whatever the run measured meanwhile is not a measurement.
    if (const int64_t gap_ns = now_ns - last_turn_ns;
        gap_ns > interval_ns * settings_.liveness && executor_) {
      const std::string why = fmt::format(
          "agent {} stalled for {} ms (stopped or starved of CPU) during the run: its "
          "measurements are not trusted",
          settings_.agent_id, gap_ns / 1'000'000);
      spdlog::warn("run {} attempt {}: {}", executor_->run_id(), executor_->attempt(), why);
      executor_->Distrust(why);
    }
    last_turn_ns = now_ns;
    Asked asked;
    if (readable) {
      zmq::message_t frame;
      while (socket_.recv(frame, zmq::recv_flags::dontwait)) {
        last_heard_ns = now_ns;
        heard_since_connect = true;
        reconnect_at_ns = 0;
        backoff_ms = settings_.reconnect_initial_ms;
        Handle(frame, &asked);
      }
    }
    if (asked.bye && asked.stay) {
      heard_since_connect = false;  // hello at every tick until the next coordinator answers
    } else if (asked.bye) {
      kept_engine_.reset();  // the sweep is over: no run will need it
    }
    if (asked.bye && !asked.stay && settings_.exit_on_bye) {
      if (executor_) executor_->Cancel("coordinator said bye");
      executor_.reset();
      return Status::Ok();
    }
    now_ns = SteadyNowNs();
    SendEnergyMessages();
    CollectProbeReport();
    CollectFinishedRun(now_ns);
    if (queued_assign_ && !executor_ && !Retiring()) {
      auto queued = std::move(queued_assign_);
      StartRun(queued->getRoot<schema::Assign>().asReader());
    }
    if (executor_ && executor_->timeout_s() > 0 &&
        static_cast<double>(now_ns - executor_->started_ns()) / 1e9 > executor_->timeout_s()) {
      executor_->Cancel(fmt::format("timed out after {:.0f} s", executor_->timeout_s()));
    }
    for (auto& [key, outgoing] : outgoing_) {
      if (now_ns - outgoing.sent_ns > int64_t{settings_.resend_after_ms} * 1'000'000) {
        SendResult(outgoing, now_ns);
      }
    }
    if (now_ns >= next_heartbeat_ns) {
      // A coordinator that restarted ignores heartbeats from agents it does not know; a hello
      // registers us as soon as it is back.
      heard_since_connect ? SendHeartbeat() : SendHello();
      next_heartbeat_ns = now_ns + interval_ns;
    }
    // Every second, and at once when the run enters a new phase (the coordinator shows it).
    if (now_ns >= next_progress_ns ||
        (executor_ && !executor_->Finished() && executor_->phase() != progress_phase_sent_)) {
      SendProgress();
      next_progress_ns = now_ns + kProgressEveryNs;
    }
    // Reconnect after a backoff, without blocking the loop: runs keep being collected and
    // their results spooled meanwhile.
    if (reconnect_at_ns == 0 && now_ns - last_heard_ns > interval_ns * settings_.liveness) {
      spdlog::warn("coordinator silent for {} ms; reconnecting in {} ms",
                   (now_ns - last_heard_ns) / 1'000'000, backoff_ms);
      reconnect_at_ns = now_ns + int64_t{backoff_ms} * 1'000'000;
      backoff_ms = std::min(backoff_ms * 2, settings_.reconnect_max_ms);
    }
    if (reconnect_at_ns > 0 && now_ns >= reconnect_at_ns) {
      Connect();
      heard_since_connect = false;
      reconnect_at_ns = 0;
      last_heard_ns = now_ns;
    }
  }
  return Status::Ok();
}

}  // namespace servesweep::agent
