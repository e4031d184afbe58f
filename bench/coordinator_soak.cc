// Soak benchmark: one coordinator (its own process, CurveZMQ, SQLite with synchronous=FULL) and
// many emulated agents, each with its own DEALER socket, in this process. Each agent answers an
// assignment with a result after --run-ms, so the coordinator sees as many short runs as the
// matrix holds. Reports the coordinator's CPU and peak memory (from wait4), dispatch latency
// (an agent's result sent -> its next assignment received), heartbeat misses (agents the
// coordinator declared lost; gaps in the coordinator's heartbeats seen by agents), and checks
// that nothing was lost: every run done, once.
//
//   coordinator_soak [--agents 1000] [--runs 100000] [--run-ms 0] [--heartbeat-ms 1000]
//                    [--commit-batch 256]
//                    [--out DIR]
#include <capnp/message.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/net.h"
#include "coordinator/coordinator.h"
#include "matrix/matrix_loader.h"
#include "transport/curve_keys.h"
#include "transport/envelope_codec.h"

namespace servesweep {
namespace {

struct Options {
  int agents = 1000;
  int runs = 100000;
  int run_ms = 0;
  int heartbeat_ms = 1000;
  int commit_batch = 256;  // the coordinator's --commit-batch (1: a transaction per result)
  std::string out;
};

struct EmulatedAgent {
  std::string id;
  zmq::socket_t socket;
  int64_t free_since_ns = 0;  // hello or last result sent; < 0 while a run is held
  int64_t last_heard_ns = 0;
  int64_t next_heartbeat_ns = 0;
  bool bye = false;
};

struct PendingReply {
  size_t agent = 0;
  int64_t due_ns = 0;
  std::unique_ptr<capnp::MallocMessageBuilder> result;
};

int64_t QueryInt(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int64_t value = -1;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    value = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  return value;
}

std::string MatrixText(const Options& o) {
  const int values = std::min(o.runs, 1000);
  std::string concurrency;
  for (int i = 1; i <= values; ++i) concurrency += (i > 1 ? ", " : "") + std::to_string(i);
  return fmt::format(R"(name: soak
engine: sim
model: m
max_attempts: 3
repeats: {}
workload: {{input_len: 8, output_len: 4, num_requests: 1}}
axes:
  concurrency: [{}]
)",
                     o.runs / values, concurrency);
}

// The coordinator, in this (forked) process; exits with its sweep's outcome.
int RunCoordinator(const Options& o, const std::string& endpoint, const CurveKeypair& server,
                   const CurveKeypair& agents) {
  matrix::LoadedMatrix matrix;
  if (Status s = matrix::ExpandMatrix(o.out + "/soak.yaml", MatrixText(o), &matrix); !s.ok()) {
    fmt::print(stderr, "{}\n", s.message());
    return 1;
  }
  coordinator::CoordinatorSettings settings;
  settings.bind = endpoint;
  settings.out_dir = o.out;
  settings.heartbeat_ms = o.heartbeat_ms;
  settings.commit_batch_max = o.commit_batch;
  settings.curve_secret_z85 = server.secret_z85;
  settings.allowed_agent_keys_z85 = {agents.public_z85};
  zmq::context_t context(1);
  coordinator::Coordinator coord(settings, context);
  Status s = coord.Prepare(matrix);
  if (s.ok()) s = coord.Bind();
  if (s.ok()) s = coord.Run();
  if (!s.ok()) {
    fmt::print(stderr, "coordinator: {}\n", s.message());
    return 1;
  }
  const auto totals = coord.Totals();
  fmt::print(
      "coordinator: {} runs, {} done, {} failed, {} duplicates dropped, {} frames rejected, {} "
      "impostor messages refused\n",
      totals.runs, totals.done, totals.failed, totals.duplicates_dropped, totals.frames_rejected,
      totals.impostors_refused);
  return totals.done == totals.runs ? 0 : 2;
}

bool Send(zmq::socket_t& socket, capnp::MallocMessageBuilder& message) {
  zmq::message_t frame = EncodeFrame(message);
  return socket.send(frame, zmq::send_flags::dontwait).has_value();
}

void SendHello(EmulatedAgent& agent) {
  capnp::MallocMessageBuilder message;
  auto inventory = NewEnvelope(message).initHello().initInventory();
  inventory.setAgentId(agent.id);
  inventory.setHostname("soak");
  inventory.setAddress("127.0.0.1");
  inventory.setPid(static_cast<uint32_t>(::getpid()));
  inventory.setEmulatedGpus(true);
  auto gpu = inventory.initGpus(1)[0];
  gpu.setName("emulated");
  inventory.initEngines(1).set(0, "sim");
  Send(agent.socket, message);
}

double Percentile(std::vector<int64_t>& values, double p) {
  if (values.empty()) return 0;
  const size_t k = std::min(values.size() - 1, static_cast<size_t>(p * (values.size() - 1)));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return static_cast<double>(values[k]) / 1e3;
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--agents")
      o.agents = std::stoi(value);
    else if (flag == "--runs")
      o.runs = std::stoi(value);
    else if (flag == "--run-ms")
      o.run_ms = std::stoi(value);
    else if (flag == "--heartbeat-ms")
      o.heartbeat_ms = std::stoi(value);
    else if (flag == "--commit-batch")
      o.commit_batch = std::stoi(value);
    else if (flag == "--out")
      o.out = value;
    else {
      fmt::print(stderr, "unknown option {}\n", flag);
      return 1;
    }
  }
  if (o.out.empty()) o.out = fmt::format("/tmp/servesweep-soak-{}", ::getpid());
  std::filesystem::remove_all(o.out);
  std::filesystem::create_directories(o.out);
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);

  CurveKeypair server, agent_keys;
  if (!GenerateCurveKeypair(&server).ok() || !GenerateCurveKeypair(&agent_keys).ok()) return 1;
  const std::string endpoint = fmt::format("tcp://127.0.0.1:{}", FreeLoopbackPort());
  fmt::print(
      "soak: {} agents, {} runs of {} ms, heartbeat {} ms, commit batch {}, CurveZMQ, results in "
      "{}\n",
      o.agents, o.runs, o.run_ms, o.heartbeat_ms, o.commit_batch, o.out);
  const int64_t start_ns = SteadyNowNs();
  std::fflush(stdout);           // or the child prints what is buffered again
  const pid_t child = ::fork();  // before any zmq context exists in this process
  if (child == 0) {
    // The coordinator logs as it does in production (info), into a file.
    if (std::freopen((o.out + "/coordinator.log").c_str(), "w", stdout) == nullptr ||
        ::dup2(::fileno(stdout), ::fileno(stderr)) < 0) {
      std::_Exit(1);
    }
    std::_Exit(RunCoordinator(o, endpoint, server, agent_keys));
  }

  zmq::context_t context(2);
  const int64_t interval_ns = int64_t{o.heartbeat_ms} * 1'000'000;
  std::vector<EmulatedAgent> agents(static_cast<size_t>(o.agents));
  std::vector<zmq::pollitem_t> items(agents.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    auto& a = agents[i];
    a.id = fmt::format("soak-{:04}", i);
    a.socket = zmq::socket_t(context, zmq::socket_type::dealer);
    a.socket.set(zmq::sockopt::routing_id, a.id);
    a.socket.set(zmq::sockopt::linger, 0);
    a.socket.set(zmq::sockopt::curve_serverkey, server.public_z85);
    a.socket.set(zmq::sockopt::curve_publickey, agent_keys.public_z85);
    a.socket.set(zmq::sockopt::curve_secretkey, agent_keys.secret_z85);
    a.socket.connect(endpoint);
    items[i] = {a.socket.handle(), 0, ZMQ_POLLIN, 0};
  }
  // Hellos go out once the coordinator has bound: a DEALER queues them until connected.
  const int64_t now0 = SteadyNowNs();
  for (auto& a : agents) {
    SendHello(a);
    a.free_since_ns = now0;
    a.last_heard_ns = now0;
    a.next_heartbeat_ns = now0 + interval_ns;
  }

  std::vector<int64_t> dispatch_ns;
  dispatch_ns.reserve(static_cast<size_t>(o.runs) + 1000);
  std::deque<PendingReply> replies;  // one constant run time: due in FIFO order
  size_t heartbeat_gaps = 0, results_sent = 0, acks = 0, byes = 0, rehellos = 0;
  int status = -1;
  rusage usage{};
  while (true) {
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(5));
    int64_t now_ns = SteadyNowNs();
    for (size_t i = 0; i < agents.size(); ++i) {
      if ((items[i].revents & ZMQ_POLLIN) == 0) continue;
      auto& a = agents[i];
      zmq::message_t frame;
      while (a.socket.recv(frame, zmq::recv_flags::dontwait)) {
        if (now_ns - a.last_heard_ns > 2 * interval_ns && a.free_since_ns != 0) ++heartbeat_gaps;
        a.last_heard_ns = now_ns;
        std::unique_ptr<DecodedEnvelope> decoded;
        if (!DecodeFrame(frame, &decoded).ok()) continue;
        auto envelope = decoded->envelope();
        switch (envelope.which()) {
          case schema::Envelope::ASSIGN: {
            auto assign = envelope.getAssign();
            if (a.free_since_ns > 0) dispatch_ns.push_back(now_ns - a.free_since_ns);
            a.free_since_ns = -1;
            PendingReply reply{i, now_ns + int64_t{o.run_ms} * 1'000'000,
                               std::make_unique<capnp::MallocMessageBuilder>()};
            auto result = NewEnvelope(*reply.result).initResult();
            result.setRunId(assign.getSpec().getRunId());
            result.setAttempt(assign.getAttempt());
            result.setAgentId(a.id);
            result.setStatus(schema::RunStatus::OK);
            result.setSpec(assign.getSpec());
            replies.push_back(std::move(reply));
            break;
          }
          case schema::Envelope::ACK:
            ++acks;
            break;
          case schema::Envelope::BYE:
            a.bye = true;
            ++byes;
            break;
          default:
            break;
        }
      }
    }
    now_ns = SteadyNowNs();
    while (!replies.empty() && replies.front().due_ns <= now_ns) {
      auto& reply = replies.front();
      auto& a = agents[reply.agent];
      Send(a.socket, *reply.result);
      ++results_sent;
      a.free_since_ns = SteadyNowNs();
      replies.pop_front();
    }
    for (auto& a : agents) {
      if (now_ns < a.next_heartbeat_ns || a.bye) continue;
      a.next_heartbeat_ns = now_ns + interval_ns;
      if (now_ns - a.last_heard_ns > 3 * interval_ns) {
        SendHello(a);  // as the real agent does when the coordinator went silent
        ++rehellos;
        continue;
      }
      capnp::MallocMessageBuilder message;
      NewEnvelope(message).initHeartbeat();
      Send(a.socket, message);
    }
    if (::wait4(child, &status, WNOHANG, &usage) == child) break;
  }
  const double wall_s = static_cast<double>(SteadyNowNs() - start_ns) / 1e9;
  for (auto& a : agents) a.socket.close();

  sqlite3* db = nullptr;
  sqlite3_open_v2((o.out + "/results.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  const int64_t done = QueryInt(db, "SELECT COUNT(*) FROM runs WHERE status='done'");
  const int64_t results = QueryInt(db, "SELECT COUNT(DISTINCT run_id) FROM results");
  const int64_t result_rows = QueryInt(db, "SELECT COUNT(*) FROM results");
  const int64_t attempts = QueryInt(db, "SELECT COUNT(*) FROM attempts");
  const int64_t lost = QueryInt(db, "SELECT COUNT(*) FROM attempts WHERE outcome='lost'");
  const int64_t registered = QueryInt(db, "SELECT COUNT(*) FROM agents");
  sqlite3_close(db);

  const double cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  fmt::print("wall {:.1f} s; coordinator exit {}; {} agents registered\n", wall_s,
             WIFEXITED(status) ? WEXITSTATUS(status) : -1, registered);
  fmt::print(
      "coordinator CPU {:.1f} s ({:.0f}% of one core, {:.1f} us per run); peak RSS {:.0f} MiB\n",
      cpu_s, 100 * cpu_s / wall_s, 1e6 * cpu_s / o.runs,
      static_cast<double>(usage.ru_maxrss) / 1024);
  fmt::print(
      "runs/s {:.0f}; dispatch latency (result sent -> next assign) p50 {:.2f} ms, p90 {:.2f} "
      "ms, p99 {:.2f} ms, max {:.2f} ms over {} assignments\n",
      o.runs / wall_s, Percentile(dispatch_ns, 0.5) / 1e3, Percentile(dispatch_ns, 0.9) / 1e3,
      Percentile(dispatch_ns, 0.99) / 1e3, Percentile(dispatch_ns, 1.0) / 1e3, dispatch_ns.size());
  fmt::print(
      "heartbeat misses: {} agents declared lost by the coordinator; {} gaps > 2 intervals "
      "seen by agents; {} re-hellos\n",
      lost, heartbeat_gaps, rehellos);
  fmt::print(
      "results sent {}, acks {}, byes {}; runs done {} / {}, result rows {} ({} distinct), "
      "attempts {}\n",
      results_sent, acks, byes, done, o.runs, result_rows, results, attempts);
  const bool nothing_lost =
      exited_ok && done == o.runs && results == o.runs && result_rows == o.runs;
  fmt::print("{}\n", nothing_lost ? "nothing lost: every run done exactly once"
                                  : "LOST OR DUPLICATED RUNS (see coordinator.log)");
  return nothing_lost ? 0 : 1;
}

}  // namespace
}  // namespace servesweep

int main(int argc, char** argv) { return servesweep::Main(argc, argv); }
