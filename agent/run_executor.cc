#include "agent/run_executor.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "agent/engine_processes.h"
#include "agent/gpu_energy.h"
#include "agent/gpu_telemetry.h"
#include "common/clock.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "engines/engine_adapter.h"
#include "engines/engine_check.h"
#include "loadgen/answer_client.h"
#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"
#include "record/record_builder.h"
#include "record/run_settings.h"
#include "scraper/http_get.h"
#include "scraper/metrics_scraper.h"

namespace servesweep::agent {
namespace {

constexpr double kReadyTimeoutCapS = 1800;
constexpr size_t kLogTailLines = 40;
constexpr int kGpuTelemetryIntervalMs = 1000;

}  // namespace

namespace {

// The assignment's placement as a kept engine remembers it: agent ids, head first.
std::string PlacementOf(schema::Assign::Reader assign) {
  std::string out;
  for (auto id : assign.getAgentIds()) out += (out.empty() ? "" : ",") + std::string(id.cStr());
  return out;
}

}  // namespace

engines::LaunchContext LaunchContextFor(schema::Assign::Reader assign) {
  engines::LaunchContext context;
  context.spec = assign.getSpec();
  context.role = assign.getRole();
  context.rank = assign.getRank();
  context.group_size = assign.getGroupSize();
  context.head_address = assign.getHeadAddress();
  for (auto address : assign.getPeerAddresses()) {
    context.peer_addresses.emplace_back(address.cStr());
  }
  return context;
}

Status ProbeCompletion(const std::string& base_url, const std::string& model, bool chat,
                       const std::string& api_key, long timeout_ms, const std::string& prompt) {
  nlohmann::json body = {{"model", model}, {"max_tokens", 1}, {"stream", false}};
  if (chat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
  } else {
    body["prompt"] = prompt;
  }
  const std::string url = base_url + (chat ? "/v1/chat/completions" : "/v1/completions");
  scraper::HttpResponse response;
  if (Status s = scraper::HttpPostJson(url, body.dump(), timeout_ms, &response, api_key); !s.ok()) {
    return Status::Unavailable(fmt::format("probe request failed: {}", s.message()));
  }
  const std::string excerpt = response.body.substr(0, 300);
  if (response.status_code != 200) {
    return Status::Unavailable(fmt::format("probe request to {} answered HTTP {}: {}", url,
                                           response.status_code, excerpt));
  }
  const auto json = nlohmann::json::parse(response.body, nullptr, false);
  if (json.is_discarded() || !json.contains("choices") || !json["choices"].is_array() ||
      json["choices"].empty()) {
    return Status::Unavailable(
        fmt::format("probe request to {} answered 200 without choices: {}", url, excerpt));
  }
  return Status::Ok();
}

RunExecutor::RunExecutor(schema::Assign::Reader assign, ExecutorContext context,
                         std::unique_ptr<ServingEngine> kept)
    : context_(std::move(context)), kept_in_(std::move(kept)) {
  assign_message_.setRoot(assign);
  run_id_ = assign.getSpec().getRunId();
  attempt_ = assign.getAttempt();
  role_ = assign.getRole();
  group_size_ = assign.getGroupSize();
  timeout_s_ = assign.getSpec().getTimeoutS();
  if (assign.getKeepEngine() &&
      assign.getSpec().getEngineLifecycle() == schema::EngineLifecycle::PER_CONFIGURATION) {
    kept_configuration_ = assign.getSpec().getEngineConfiguration();
  }
  started_ns_ = SteadyNowNs();
  thread_ = std::thread([this] { Execute(); });
}

RunExecutor::~RunExecutor() {
  Cancel("agent shutting down");
  Join();
}

void RunExecutor::Join() {
  if (thread_.joinable()) thread_.join();
}

void RunExecutor::Cancel(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_.load()) return;
    cancel_reason_ = reason;
    cancelled_.store(true);
  }
  // A load blocked on a stuck engine ends quickly once the engine is gone.
  std::lock_guard<std::mutex> lock(mutex_);
  for (int pgid : engine_pgids_) {
    if (pgid > 0) ::kill(-pgid, SIGKILL);
  }
}

void RunExecutor::Release(const std::string& reason, bool keep_engine) {
  if (keep_engine && role_ == schema::Role::WORKER && !kept_configuration_.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_.load()) return;
    keep_on_release_.store(true);
    cancel_reason_ = reason;
    cancelled_.store(true);  // the holding loop ends; its processes stay up
    return;
  }
  Cancel(reason);
}

void RunExecutor::SetEnginePgids(std::vector<int> pgids) {
  std::lock_guard<std::mutex> lock(mutex_);
  engine_pgids_ = std::move(pgids);
}

std::string RunExecutor::cancel_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancel_reason_;
}

std::string RunExecutor::phase() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return phase_;
}

void RunExecutor::SetPhase(const char* phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = phase;
}

void RunExecutor::Distrust(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (distrust_reason_.empty()) distrust_reason_ = reason;
  }
  Cancel(reason);
}

std::unique_ptr<capnp::MallocMessageBuilder> RunExecutor::TakeResult() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (result_ && !distrust_reason_.empty()) {
    // The stall comes first in the reason: an OK result finished before the loop noticed it
    // (its latencies include the stall), and a failure is most likely the stall's doing (the
    // cancel kills the engine under the load).
    auto result = result_->getRoot<schema::RunResult>();
    const std::string error = result.getError().cStr();
    if (result.getStatus() == schema::RunStatus::OK) {
      result.setStatus(schema::RunStatus::FAILED);
      result.setError(distrust_reason_);
    } else if (error.find(distrust_reason_) == std::string::npos) {
      result.setError(fmt::format("{}; then: {}", distrust_reason_, error));
    }
  }
  return std::move(result_);
}

std::unique_ptr<ServingEngine> RunExecutor::TakeKeptEngine() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(kept_out_);
}

void RunExecutor::Execute() {
  if (role_ == schema::Role::WORKER) {
    ExecuteWorker();
    finished_.store(true);
    return;
  }
  auto message = std::make_unique<capnp::MallocMessageBuilder>();
  auto result = message->initRoot<schema::RunResult>();
  auto assign = assign_message_.getRoot<schema::Assign>().asReader();
  result.setRunId(run_id_);
  result.setAttempt(attempt_);
  result.setAgentId(context_.agent_id);
  result.setSpec(assign.getSpec());
  result.setAgentIds(assign.getAgentIds());
  result.setStartedAtUnixMs(UnixNowMs());
  try {
    ExecuteHead(result);
  } catch (const std::exception& e) {
    result.setStatus(schema::RunStatus::FAILED);
    result.setError(fmt::format("agent error: {}", e.what()));
  }
  if (cancelled() && result.getStatus() == schema::RunStatus::OK) {
    result.setStatus(schema::RunStatus::CANCELLED);
    result.setError(fmt::format("cancelled: {}", cancel_reason()));
  }
  result.setFinishedAtUnixMs(UnixNowMs());
  if (result.hasRecord()) {
    result.getRecord().setAttemptS(
        static_cast<double>(result.getFinishedAtUnixMs() - result.getStartedAtUnixMs()) / 1e3);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(message);
  }
  finished_.store(true);
}

// The head's run, phase by phase; each phase returns Status and the first failure ends the run
// (its code decides the result: invalid argument = refused, never retried; anything else =
// failed, retried while attempts are left). Members are destroyed in reverse order: the engines
// are stopped before the executor forgets their process groups.
class HeadRun {
 public:
  HeadRun(RunExecutor& executor, schema::RunResult::Builder result)
      : x_(executor),
        assign_(executor.assign_message_.getRoot<schema::Assign>().asReader()),
        spec_(assign_.getSpec()),
        result_(result),
        engine_(ReuseOrStop(executor, assign_, &reused_, &restart_why_)),
        engines_(engine_->group) {}

  // The engine's launch, the node's facts and the run's conditions (recorded whatever follows);
  // the load settings are checked here, before any engine starts.
  Status Plan();
  // The engines' own argument handling over the launch (engine_check.h): a rejected command
  // line is refused before anything starts; the resolved settings go into the record.
  Status CheckEngines();
  Status StartEngines();
  // /health answers 200 (where the engine has one), the model is listed, and one real request
  // is answered; cold start ends there.
  Status AwaitReady();
  // A reused engine starts the run from the state a fresh one would: its prefix cache reset,
  // nothing running or waiting, the reset checked with a repeated prompt. The record says which
  // (cache_state). Then the validity gate's first counters.
  Status ResetCache();
  // Warm-up as its own phase, so neither the figures nor the engine signals include it.
  Status WarmUp();
  // This node's energy counters at an edge of the measured phase (0 = before, 1 = after), and
  // in a multi-node run the other nodes' (agent/peer_energy.h), which it waits for.
  void ReadEnergyEdge(uint8_t edge);
  // The measured phase, with /metrics scraped and GPU telemetry sampled alongside.
  Status Measure();
  // Every quality task at temperature 0, after the measured phase (not timed, not in the
  // figures or the engine signals).
  void QualityGate();
  // Whether the engine survived the run; then it is stopped.
  void Drain();
  // The figures, requests and samples into the result; fails a run where nothing succeeded or
  // the engine died.
  Status Record();
  // The engine, when Drain() kept it up for the next run of its configuration.
  std::unique_ptr<ServingEngine> TakeKeptEngine() {
    return keep_ ? std::move(engine_) : std::unique_ptr<ServingEngine>();
  }

 private:
  // The agent's kept engine when it serves this run (same configuration, per_configuration,
  // still alive; on several agents only where the whole group reuses its engine, in the same
  // placement), else a fresh one; a kept engine that does not fit is stopped here.
  static std::unique_ptr<ServingEngine> ReuseOrStop(RunExecutor& x, schema::Assign::Reader assign,
                                                    bool* reused, std::string* restart_why);
  // The engine's part of the record: its id, this run's position on it, its age, the lifecycle.
  void RecordEngine();
  // The cache-reset request and its answer: whether the engine says it reset.
  Status PostCacheReset();
  // A failure of the engine: its log tail goes into the result, the exit status into the reason.
  Status EngineFailure(const std::string& what);

  RunExecutor& x_;
  schema::Assign::Reader assign_;
  schema::RunSpec::Reader spec_;
  schema::RunResult::Builder result_;
  engines::EngineLaunch launch_;
  record::NodeFacts node_;
  std::string log_prefix_;
  bool local_engine_ = false;
  bool reused_ = false;      // engine_ served an earlier run of this configuration
  bool keep_ = false;        // Drain() left engine_ running for the next run
  std::string restart_why_;  // a kept engine that could not serve this run: why
  std::unique_ptr<ServingEngine> engine_;
  EngineGroup& engines_;
  // Declared after engines_, so destroyed first: Cancel() never signals a reaped (reusable) pgid.
  struct PgidReset {
    RunExecutor& executor;
    ~PgidReset() { executor.SetEnginePgids({}); }
  } pgid_reset_{x_};
  int64_t spawn_ns_ = 0;
  double cold_start_ms_ = std::numeric_limits<double>::quiet_NaN();
  record::RunSettings run_settings_;  // derived once from the spec (record/run_settings.h)
  std::string metrics_url_;           // "" when the engine has none (an external endpoint)
  // The engine's counters before warm-up and after the measured phase: the validity gate's.
  std::map<std::string, double> counters_before_, counters_after_;
  loadgen::LoadResult warm_;
  loadgen::LoadResult load_;
  scraper::MetricsScraper scraper_;
  GpuTelemetrySampler gpu_sampler_;
  bool gpu_sampled_ = false;
  std::vector<scraper::ScrapedSample> gpu_samples_;
  record::EnergyInputs energy_;  // the counters around the measured phase, its GPUs and window
  std::vector<PeerEnergyRead> peer_reads_;  // the other nodes' answers, both edges
  std::optional<record::QualityScore> quality_;
  bool engine_died_ = false;
};

std::unique_ptr<ServingEngine> HeadRun::ReuseOrStop(RunExecutor& x, schema::Assign::Reader assign,
                                                    bool* reused, std::string* restart_why) {
  const auto spec = assign.getSpec();
  const bool group = assign.getGroupSize() > 1;
  std::unique_ptr<ServingEngine> kept = std::move(x.kept_in_);
  if (kept && kept->configuration == spec.getEngineConfiguration().cStr()) {
    if (group && (!assign.getReuseEngine() || kept->placement != PlacementOf(assign))) {
      spdlog::info("run {}: stopping engine {}: its group starts afresh", x.run_id_,
                   kept->engine_id);
    } else if (kept->group.AnyExited()) {
      *restart_why = fmt::format("restarted: engine {} had exited after {} run(s)", kept->engine_id,
                                 kept->runs_served);
      spdlog::warn("run {}: the kept engine {} had exited; starting a fresh one", x.run_id_,
                   kept->engine_id);
    } else if (spec.getEngineLifecycle() == schema::EngineLifecycle::PER_CONFIGURATION) {
      *reused = true;
      return kept;
    }
  }
  if (kept)
    spdlog::info("run {}: stopping engine {} (another configuration)", x.run_id_, kept->engine_id);
  kept.reset();  // stops it: the GPUs are the new engine's
  return std::make_unique<ServingEngine>();
}

Status HeadRun::Plan() {
  std::filesystem::create_directories(x_.context_.work_dir);
  if (assign_.getGroupSize() > 1 && assign_.getReuseEngine() && !reused_) {
    // The other agents reuse their parts of an engine this head no longer has: the attempt
    // fails, its parts are stopped, and the retry starts the whole group afresh.
    return Status::Unavailable(fmt::format(
        "the group's kept engine is gone on its head agent {} ({}); the next attempt starts it "
        "afresh on every agent",
        x_.context_.agent_id, restart_why_.empty() ? "not kept" : restart_why_));
  }
  Status planned;
  if (reused_) {
    // The engine and what was read about it when it started.
    launch_ = engine_->launch;
    log_prefix_ = engine_->log_prefix;
    node_ = engine_->node;
    local_engine_ = !launch_.processes.empty();
  } else {
    auto adapter = engines::MakeEngineAdapter(spec_.getEngine());
    if (!adapter) {
      return Status::InvalidArgument(fmt::format("engine '{}' cannot be started on agent {}",
                                                 spec_.getEngine().cStr(), x_.context_.agent_id));
    }
    engines::LaunchContext launch_context = LaunchContextFor(assign_);
    launch_context.port = FreeLoopbackPort();
    launch_context.self_executable = SelfExecutable();
    planned = adapter->Plan(launch_context, &launch_);
    log_prefix_ = fmt::format("{}/{}.{}", x_.context_.work_dir, x_.run_id_, x_.attempt_);
    node_.gpu_model = x_.context_.gpu_model;
    node_.interconnect = x_.context_.interconnect;
    node_.engine_version = launch_.version;
    if (planned.ok()) ReadProvenance(launch_, log_prefix_, &node_);
    local_engine_ = planned.ok() && !launch_.processes.empty();
    if (local_engine_) {
      const GpuProvenance gpu = ReadGpuProvenance(log_prefix_, x_.context_.agent_id);
      node_.driver_version = gpu.driver_version;
      node_.cuda_version = gpu.cuda_version;
      node_.gpu_topology = gpu.topology;
      node_.why_no_gpu_facts = gpu.why_missing;
      if (node_.nccl_version.empty()) node_.nccl_version = gpu.nccl_version;
    } else {
      node_.why_no_gpu_facts = "no engine started on the agent";
    }
  }
  run_settings_ = record::RunSettingsFor(spec_, planned.ok() ? launch_.base_url : "");
  record::FillConditions(spec_, node_, run_settings_.load, result_.initRecord());
  // The same rules `plan` checked: a spec that reaches an agent broken (an older coordinator, a
  // hand-written assignment) is refused before any engine starts.
  run_settings_.load.api_key = launch_.api_key;
  run_settings_.load.reuse_connections = launch_.reuse_connections;
  // The run's own settings against the engine's flag table are refused (InvalidArgument, the
  // same anywhere); anything else (a missing peer address) may succeed on another attempt.
  if (!planned.ok()) return planned.Prefixed("engine not started");
  if (Status s = workload::ValidateLoadSettings(run_settings_.load); !s.ok()) {
    return s.Prefixed("the run's load settings");
  }
  if (reused_) {
    // Checked when it started: the same resolution holds for every run on it.
    auto effective = engine_->effective.getRoot<schema::BenchmarkRecord>().asReader();
    auto record = result_.getRecord();
    record.setEffectiveSettings(effective.getEffectiveSettings());
    record.setEffectiveSettingsSource(effective.getEffectiveSettingsSource());
    return Status::Ok();
  }
  if (Status s = CheckPrograms(launch_, x_.context_.agent_id); !s.ok()) return s;
  return CheckEngines();
}

Status HeadRun::CheckEngines() {
  auto record = result_.getRecord();
  if (!x_.context_.engine_check) {
    record.setEffectiveSettingsSource("n/a: the engine check was skipped (--skip-engine-check)");
    if (!launch_.unchecked.empty()) spdlog::warn("run {}: {}", x_.run_id_, launch_.unchecked);
    return Status::Ok();
  }
  engines::EngineCheckOptions options;
  options.work_dir = x_.context_.work_dir;
  std::vector<engines::CheckVerdict> verdicts;
  const auto processes = engines::ProcessesOf(launch_, spec_);
  if (Status s = engines::CheckProcesses(processes, options, &verdicts); !s.ok()) return s;
  std::vector<std::pair<std::string, engines::CheckVerdict>> by_process;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const std::string& name = processes[i].process.name;
    const engines::CheckVerdict& v = verdicts[i];
    for (const auto& w : v.warnings)
      spdlog::warn("run {} [{}] {}: {}", x_.run_id_, name, v.checker, w);
    for (const auto& n : v.spellings) spdlog::warn("run {} [{}]: {}", x_.run_id_, name, n);
    spdlog::info("run {} [{}]: engine check {}", x_.run_id_, name, v.Describe());
    const std::string why = fmt::format("engine check of [{}] on agent {}: {}", name,
                                        x_.context_.agent_id, v.Describe());
    // A refusal by the engine's own parser is the run's settings (the same anywhere); a missing
    // library or another version is this node's.
    if (v.outcome == engines::CheckVerdict::Outcome::kRejected) return Status::InvalidArgument(why);
    if (v.outcome == engines::CheckVerdict::Outcome::kMissingPackages) {
      return Status::FailedPrecondition(why);
    }
    if (!launch_.unchecked.empty() && !v.ok()) {
      return Status::InvalidArgument(fmt::format("{}; {}", launch_.unchecked, why));
    }
    // The engine is on PATH (CheckPrograms) yet its check could not run there: not the asked
    // version, or it does not import. Skippable with --skip-engine-check.
    if (v.outcome == engines::CheckVerdict::Outcome::kUnavailable)
      return Status::FailedPrecondition(why);
    by_process.emplace_back(name, v);
  }
  engines::FillEffectiveSettings(by_process, record);
  return Status::Ok();
}

Status HeadRun::StartEngines() {
  spawn_ns_ = SteadyNowNs();
  if (!reused_) {
    if (Status s = engines_.Start(launch_, log_prefix_); !s.ok()) return s;
    engine_->configuration = spec_.getEngineConfiguration();
    engine_->placement = PlacementOf(assign_);
    engine_->engine_id = fmt::format("{}.{}@{}", x_.run_id_, x_.attempt_, x_.context_.agent_id);
    engine_->launch = launch_;
    engine_->log_prefix = log_prefix_;
    engine_->node = node_;
    engine_->started_ns = spawn_ns_;
    auto record = result_.getRecord().asReader();
    auto effective = engine_->effective.initRoot<schema::BenchmarkRecord>();
    effective.setEffectiveSettings(record.getEffectiveSettings());
    effective.setEffectiveSettingsSource(record.getEffectiveSettingsSource());
  }
  RecordEngine();
  x_.SetEnginePgids(engines_.Pgids());
  if (x_.cancelled()) engines_.Signal(SIGKILL);  // a cancel that raced the spawn
  return Status::Ok();
}

void HeadRun::RecordEngine() {
  auto record = result_.getRecord();
  const bool per_configuration =
      spec_.getEngineLifecycle() == schema::EngineLifecycle::PER_CONFIGURATION;
  record.setEngineLifecycle(per_configuration ? "per_configuration" : "per_run");
  record.setEngineId(engine_->engine_id);
  record.setEngineRunIndex(engine_->runs_served);
  record.setEngineAgeS(static_cast<double>(SteadyNowNs() - engine_->started_ns) / 1e9);
  record.setCacheState(reused_                ? "not_reset: not reset yet"
                       : restart_why_.empty() ? "cold"
                                              : "cold (" + restart_why_ + ")");
}

Status HeadRun::EngineFailure(const std::string& what) {
  const auto exited = engines_.FirstExit();
  result_.setEngineLogTail(engines_.LogTail(kLogTailLines));
  return Status::Unavailable(fmt::format(
      "{}{}; engine log: {}", what,
      exited ? fmt::format(" ({} {})", exited->first, DescribeExit(exited->second)) : "",
      engines_.LogPaths()));
}

Status HeadRun::AwaitReady() {
  x_.SetPhase("starting");
  // A second inside the run's own timeout, so an engine that never gets ready fails with that
  // reason rather than racing the agent's run watchdog.
  const double run_timeout_s = spec_.getTimeoutS();
  const double ready_timeout_s =
      std::min(kReadyTimeoutCapS, run_timeout_s > 2 ? run_timeout_s - 1 : run_timeout_s);
  auto elapsed_s = [&] { return static_cast<double>(SteadyNowNs() - spawn_ns_) / 1e9; };
  while (!launch_.health_path.empty()) {
    if (x_.cancelled()) {
      return EngineFailure("cancelled while the engine started: " + x_.cancel_reason());
    }
    if (engines_.AnyExited()) return EngineFailure("engine exited before it was ready");
    scraper::HttpResponse health;
    if (scraper::HttpGet(launch_.base_url + launch_.health_path, 1000, &health).ok() &&
        health.status_code == 200) {
      break;
    }
    if (elapsed_s() > ready_timeout_s) {
      return EngineFailure(fmt::format("engine not ready after {:.0f} s", ready_timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  scraper::HttpResponse models;
  if (!scraper::HttpGet(launch_.base_url + "/v1/models", 10000, &models, launch_.api_key).ok() ||
      models.status_code != 200 ||
      models.body.find(fmt::format("\"{}\"", spec_.getModel().cStr())) == std::string::npos) {
    return EngineFailure(fmt::format("engine ready but /v1/models does not list '{}' (HTTP {})",
                                     spec_.getModel().cStr(), models.status_code));
  }
  // One real request: an engine that lists its model may still fail to generate.
  const long probe_timeout_ms =
      static_cast<long>(std::max(30.0, ready_timeout_s - elapsed_s()) * 1000);
  if (Status s = ProbeCompletion(launch_.base_url, spec_.getModel().cStr(),
                                 spec_.getWorkload().getApi() == schema::ApiKind::CHAT_COMPLETIONS,
                                 launch_.api_key, probe_timeout_ms);
      !s.ok()) {
    return EngineFailure(fmt::format("engine listed its model, but {}", s.message()));
  }
  // The engine's cold start: the run that started it; a later run on it has none of its own.
  if (!launch_.processes.empty() && !reused_) cold_start_ms_ = elapsed_s() * 1e3;
  metrics_url_ = !launch_.metrics_url.empty()   ? launch_.metrics_url
                 : launch_.metrics_path.empty() ? std::string()
                                                : launch_.base_url + launch_.metrics_path;
  if (launch_.metrics_persona.empty()) metrics_url_.clear();
  return Status::Ok();
}

Status HeadRun::PostCacheReset() {
  std::vector<std::string> paths = {launch_.cache_reset_path};
  if (const size_t at = launch_.cache_reset_path.find("{slot}"); at != std::string::npos) {
    // llama.cpp: one erase per slot, the slots as its /slots lists them.
    scraper::HttpResponse slots;
    if (Status s = scraper::HttpGet(launch_.base_url + "/slots", 10000, &slots, launch_.api_key);
        !s.ok() || slots.status_code != 200) {
      return Status::Unavailable(fmt::format("GET /slots answered HTTP {}", slots.status_code));
    }
    const auto list = nlohmann::json::parse(slots.body, nullptr, false);
    if (!list.is_array()) return Status::Unavailable("GET /slots did not answer a list");
    paths.clear();
    for (const auto& slot : list) {
      if (!slot.is_object() || !slot.contains("id") || !slot["id"].is_number_integer()) continue;
      std::string path = launch_.cache_reset_path;
      path.replace(at, 6, std::to_string(slot["id"].get<int64_t>()));
      paths.push_back(path);
    }
  }
  for (const auto& path : paths) {
    scraper::HttpResponse response;
    const std::string url = launch_.base_url + path;
    if (Status s = scraper::HttpPostJson(url, "{}", 30000, &response, launch_.api_key); !s.ok()) {
      return Status::Unavailable(fmt::format("POST {}: {}", url, s.message()));
    }
    // vLLM 0.33 answers 200 {"success": false} when blocks are still held (0.11: always an
    // empty 200); SGLang answers 400 while requests are in flight.
    const auto answer = nlohmann::json::parse(response.body, nullptr, false);
    const bool refused = answer.is_object() && answer.contains("success") &&
                         answer["success"].is_boolean() && !answer["success"].get<bool>();
    if (response.status_code != 200 || refused) {
      return Status::Unavailable(fmt::format("POST {} answered HTTP {}: {}", url,
                                             response.status_code, response.body.substr(0, 200)));
    }
  }
  return Status::Ok();
}

Status HeadRun::ResetCache() {
  if (reused_) {
    x_.SetPhase("resetting");
    auto record = result_.getRecord();
    std::string state;
    if (launch_.cache_reset_path.empty()) {
      state = fmt::format("not_reset: servesweep has no prefix-cache reset for {} {}",
                          spec_.getEngine().cStr(), node_.engine_version);
    } else {
      // Idle first: an engine refuses (or silently skips) a reset while requests hold blocks.
      constexpr int kIdleWaitMs = 30000, kPollMs = 50;
      std::map<std::string, double> signals;
      for (int waited = 0; !metrics_url_.empty() && waited < kIdleWaitMs; waited += kPollMs) {
        if (!scraper::ScrapeSignals(metrics_url_, launch_.metrics_persona, &signals).ok()) break;
        if (signals["running"] == 0 && signals["waiting"] == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      }
      // The check: a prompt sent before the reset must find nothing cached after it (the
      // engine's prefix-cache hit counter does not move), then a second reset drops it again.
      const bool chat = spec_.getWorkload().getApi() == schema::ApiKind::CHAT_COMPLETIONS;
      // As long as the engine's cache needs (EngineLaunch::reset_probe_words), short enough for
      // a small context (llama.cpp's is shared by its slots; a word is about three tokens).
      const auto config = spec_.getEngineConfig();
      const uint32_t context_tok = config.getContextLenTok();
      const uint32_t words =
          context_tok > 0 ? std::min<uint32_t>(
                                launch_.reset_probe_words,
                                context_tok / (4 * std::max<uint32_t>(1, config.getMaxNumSeqs())))
                          : launch_.reset_probe_words;
      std::string probe = "servesweep cache reset check";
      for (uint32_t i = 0; i < words; ++i) probe += fmt::format(" w{}", i);
      std::map<std::string, double> before, after;
      Status s = ProbeCompletion(launch_.base_url, spec_.getModel().cStr(), chat, launch_.api_key,
                                 30000, probe);
      if (s.ok()) s = PostCacheReset();
      const bool counted =
          s.ok() && !metrics_url_.empty() &&
          scraper::ScrapeSignals(metrics_url_, launch_.metrics_persona, &before).ok() &&
          before.count("prefix_cache_hits") > 0;
      if (s.ok()) {
        s = ProbeCompletion(launch_.base_url, spec_.getModel().cStr(), chat, launch_.api_key, 30000,
                            probe);
      }
      if (s.ok() && counted &&
          scraper::ScrapeSignals(metrics_url_, launch_.metrics_persona, &after).ok()) {
        const double hits = after["prefix_cache_hits"] - before["prefix_cache_hits"];
        if (hits > 0) {
          s = Status::FailedPrecondition(fmt::format(
              "a prompt repeated after the reset still hit {:.0f} cached tokens", hits));
        }
      }
      if (s.ok()) s = PostCacheReset();
      state = !s.ok()   ? "not_reset: " + s.message()
              : counted ? "reset"
                        : "reset (unverified: the engine reports no prefix-cache hits)";
    }
    record.setCacheState(state);
    if (state.rfind("not_reset", 0) == 0) spdlog::warn("run {}: {}", x_.run_id_, state);
  }
  // The validity gate's first counters: after readiness and the reset, before warm-up.
  if (!metrics_url_.empty() &&
      !scraper::ScrapeSignals(metrics_url_, launch_.metrics_persona, &counters_before_).ok()) {
    counters_before_.clear();  // not reconciled: said in the record
  }
  return Status::Ok();
}

Status HeadRun::WarmUp() {
  if (run_settings_.load.warmup_requests > 0) {
    x_.completed_.store(0);
    x_.total_.store(run_settings_.load.warmup_requests);
    x_.SetPhase("warmup");
    const loadgen::LoadSettings warmup = workload::WarmupLoadSettings(run_settings_.load);
    if (Status s = loadgen::RunLoad(
            warmup, &warm_,
            [this](const loadgen::Progress& p) { x_.completed_.store(p.completed); });
        !s.ok()) {
      return s.Prefixed("warm-up");
    }
    // Failed warm-up requests are not fatal: the measured phase shows what fails, and the
    // validity gate judges the run (a dead engine is caught as dead).
    const loadgen::BenchSummary warm = loadgen::Summarize(warm_);
    if (warm.failed > 0) {
      spdlog::warn("run {}: {} of {} warm-up requests failed: {}", x_.run_id_, warm.failed,
                   warmup.num_requests, loadgen::DescribeFailureReasons(warm.failure_reasons));
    }
    run_settings_.load.warmup_requests = 0;
  }
  if (x_.cancelled()) return EngineFailure("cancelled during warm-up: " + x_.cancel_reason());
  return Status::Ok();
}

void HeadRun::ReadEnergyEdge(uint8_t edge) {
  // Long enough for a worker's nvidia-smi to time out (10 s) and the answer to come back.
  constexpr auto kPeerAnswerTimeout = std::chrono::seconds(12);
  const size_t peers = assign_.getAgentIds().size() > 1 ? assign_.getAgentIds().size() - 1 : 0;
  if (peers > 0) x_.peer_energy_.Ask(edge);
  (edge == 0 ? energy_.before : energy_.after) =
      ReadEnergyCounters(log_prefix_ + (edge == 0 ? ".energy-before.csv" : ".energy-after.csv"));
  if (peers == 0) return;
  for (auto& answer : x_.peer_energy_.AwaitAnswers(edge, peers, kPeerAnswerTimeout)) {
    peer_reads_.push_back(std::move(answer));
  }
  if (edge == 0) return;
  // Every other node of the placement: both its reads, or why it stands for no GPU.
  energy_.other_nodes.clear();
  energy_.other_nodes_unread.clear();
  for (size_t k = 1; k < assign_.getAgentIds().size(); ++k) {
    const std::string node = assign_.getAgentIds()[k];
    const PeerEnergyRead* reads[2] = {nullptr, nullptr};
    for (const auto& r : peer_reads_) {
      if (r.node == node) reads[r.edge & 1] = &r;
    }
    if (reads[0] == nullptr || reads[1] == nullptr) {
      energy_.other_nodes_unread.push_back(
          fmt::format("node {} did not answer the energy read {} the measured phase within {} s",
                      node, reads[0] == nullptr ? "before" : "after", kPeerAnswerTimeout.count()));
      continue;
    }
    energy_.other_nodes.push_back(
        {node, reads[0]->gpus, reads[0]->prefill, reads[0]->read, reads[1]->read});
  }
}

Status HeadRun::Measure() {
  // Counts before the phase: a report between the two reads the old phase, never warm-up
  // counts under "measuring".
  x_.completed_.store(0);
  x_.total_.store(run_settings_.load.num_requests);
  x_.SetPhase("measuring");
  // The energy counters just before and just after the phase (record/run_energy.h).
  if (local_engine_) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    RunGpusOnNode(LaunchContextFor(assign_), visible != nullptr ? visible : "", &energy_);
    ReadEnergyEdge(0);
    energy_.power_interval_ms = kGpuTelemetryIntervalMs;
  }
  const int64_t measured_origin_ns = SteadyNowNs();
  energy_.phase_start_ns = measured_origin_ns;
  if (!metrics_url_.empty()) {
    scraper_.Start(metrics_url_, launch_.metrics_persona, measured_origin_ns);
  }
  if (local_engine_) {
    gpu_sampler_.Start(log_prefix_ + ".gpu.csv", kGpuTelemetryIntervalMs, measured_origin_ns);
  }
  const Status status =
      loadgen::RunLoad(run_settings_.load, &load_,
                       [this](const loadgen::Progress& p) { x_.completed_.store(p.completed); });
  energy_.phase_end_ns = SteadyNowNs();
  if (local_engine_) ReadEnergyEdge(1);
  scraper_.Stop();
  if (!metrics_url_.empty() &&
      !scraper::ScrapeSignals(metrics_url_, launch_.metrics_persona, &counters_after_).ok()) {
    counters_after_.clear();
  }
  gpu_sampled_ = gpu_sampler_.available();
  gpu_sampler_.Stop();
  gpu_samples_ = gpu_sampler_.Samples();
  return status;
}

void HeadRun::QualityGate() {
  if (spec_.getQuality().getTasks().size() == 0 || x_.cancelled() || engines_.AnyExited()) return;
  x_.SetPhase("quality");
  loadgen::AnswerSettings ask;
  ask.base_url = launch_.base_url;
  ask.api = run_settings_.load.api;
  ask.model = spec_.getModel();
  ask.api_key = launch_.api_key;
  ask.max_tokens = spec_.getQuality().getMaxTokens();
  ask.concurrency = run_settings_.load.concurrency > 0
                        ? std::min<uint32_t>(8, run_settings_.load.concurrency)
                        : 8;
  std::vector<std::string> prompts;
  for (auto task : spec_.getQuality().getTasks()) prompts.emplace_back(task.getPrompt());
  quality_ = record::ScoreQuality(spec_, loadgen::AskAll(ask, prompts));
  if (quality_->failed > 0) {
    spdlog::warn("run {}: {} of {} quality tasks got no answer (first error: {})", x_.run_id_,
                 quality_->failed, quality_->tasks, quality_->first_error);
  }
}

void HeadRun::Drain() {
  x_.SetPhase("draining");
  // A crashed engine's sockets close a moment before the process can be reaped: requests already
  // fail ("connection refused") while waitpid still sees it alive, and a load that ends in that
  // window would call the run done. When a request failed, give the death a moment to show.
  const bool any_request_failed =
      std::any_of(load_.requests.begin(), load_.requests.end(),
                  [](const loadgen::RequestRecord& r) { return !r.success; });
  engine_died_ = engines_.AnyExited();
  for (int wait = 0; !engine_died_ && any_request_failed && local_engine_ && wait < 25; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    engine_died_ = engines_.AnyExited();
  }
  x_.SetEnginePgids({});
  // Kept for the next run of its configuration (the coordinator has one pending), unless it
  // died or the run was cancelled.
  keep_ = assign_.getKeepEngine() &&
          spec_.getEngineLifecycle() == schema::EngineLifecycle::PER_CONFIGURATION &&
          local_engine_ && !engine_died_ && !x_.cancelled();
  if (!keep_) engines_.Stop(std::chrono::seconds(10));
}

Status HeadRun::Record() {
  const loadgen::BenchSummary summary = loadgen::Summarize(load_, run_settings_.slo);
  auto samples = scraper_.Samples();
  record::FillFigures(spec_, summary, samples, cold_start_ms_, result_.getRecord());
  record::FillGpuTelemetry(
      gpu_samples_,
      !local_engine_ ? "no engine started on the agent"
      : gpu_sampled_ ? "nvidia-smi printed no samples"
      : node_.why_no_gpu_facts.empty()
          ? fmt::format("nvidia-smi did not start on agent {}", x_.context_.agent_id)
          : node_.why_no_gpu_facts,
      result_.getRecord());
  energy_.power_samples = gpu_samples_;
  record::FillEnergy(local_engine_ ? record::MeasureRunEnergy(energy_)
                                   : record::NoEnergy("no engine started on the agent"),
                     result_.getRecord());
  samples.insert(samples.end(), gpu_samples_.begin(), gpu_samples_.end());
  if (quality_) record::FillQuality(*quality_, result_.getRecord());

  auto requests = result_.initRequests(static_cast<unsigned>(load_.requests.size()));
  for (size_t i = 0; i < load_.requests.size(); ++i) {
    record::CopyRequestRecord(load_.requests[i], requests[i], load_.adapter_names);
  }
  auto engine_samples = result_.initEngineSamples(static_cast<unsigned>(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    engine_samples[i].setAtNs(samples[i].at_ns);
    engine_samples[i].setName(samples[i].signal);
    engine_samples[i].setValue(samples[i].value);
  }
  auto record = result_.getRecord();
  record.setScrapeIntervalMs(metrics_url_.empty() ? 0 : scraper::MetricsScraper::kFirstIntervalMs);
  record.setMeasuredScrapes(static_cast<uint32_t>(scraper_.scrapes()));
  if (engine_died_ && !x_.cancelled()) {
    return EngineFailure(
        fmt::format("engine died during the run after {} completed request(s)", summary.completed));
  }
  // The validity gate: a run that measured is recorded, valid or not; an invalid one (nothing
  // generated, too many failures, counts that disagree, a restart) is not retried.
  record::ValidityInputs gate;
  for (const auto* phase : {&warm_.requests, &load_.requests}) {
    for (const auto& r : *phase) gate.requests.push_back(&r);
  }
  gate.measured = summary.completed + summary.failed;
  gate.completed = summary.completed;
  gate.measured_output_tok = summary.total_output_tokens;
  gate.min_success_rate = spec_.getMinSuccessRate();
  gate.before = counters_before_;
  gate.after = counters_after_;
  gate.during = scraper_.Samples();
  gate.prefix_hit_rate_target = spec_.getWorkload().getPrefixHitRate();
  record::FillValidity(record::JudgeValidity(gate), record);
  return Status::Ok();
}

void RunExecutor::ExecuteHead(schema::RunResult::Builder result) {
  HeadRun run(*this, result);
  Status status = run.Plan();
  if (status.ok()) status = run.StartEngines();
  if (status.ok()) status = run.AwaitReady();
  if (status.ok()) status = run.ResetCache();
  if (status.ok()) status = run.WarmUp();
  if (status.ok()) status = run.Measure();
  if (status.ok()) {
    run.QualityGate();
    run.Drain();
    status = run.Record();
  }
  if (status.ok()) {
    result.setStatus(schema::RunStatus::OK);
    if (auto kept = run.TakeKeptEngine()) {
      ++kept->runs_served;
      std::lock_guard<std::mutex> lock(mutex_);
      kept_out_ = std::move(kept);
    }
    return;
  }
  // A permanent error of the run's own settings is refused: another attempt would fail the same.
  result.setStatus(status.code() == StatusCode::kInvalidArgument ? schema::RunStatus::REFUSED
                                                                 : schema::RunStatus::FAILED);
  result.setError(status.message());
}

void RunExecutor::ExecuteWorker() {
  auto assign = assign_message_.getRoot<schema::Assign>().asReader();
  // This agent's part of the engine: the one kept from the previous run when the whole group
  // reuses its engine, else a fresh one (what was kept is stopped: the GPUs are the new run's).
  std::unique_ptr<ServingEngine> part = std::move(kept_in_);
  const bool reuse = part && assign.getReuseEngine() &&
                     part->configuration == assign.getSpec().getEngineConfiguration().cStr() &&
                     part->placement == PlacementOf(assign) && part->rank == assign.getRank() &&
                     !part->group.AnyExited();
  if (reuse) {
    spdlog::info("run {}: worker reuses engine part {} ({} run(s) served)", run_id_,
                 part->engine_id, part->runs_served);
    SetEnginePgids(part->group.Pgids());
  } else {
    part = std::make_unique<ServingEngine>();
    part->configuration = assign.getSpec().getEngineConfiguration();
    part->placement = PlacementOf(assign);
    part->rank = assign.getRank();
    part->engine_id = fmt::format("{}.{}@{}", run_id_, attempt_, context_.agent_id);
    StartWorkerPart(assign, part->group);
  }
  SetPhase("holding");
  // Until released: this node's GPUs' energy counters whenever the head asks.
  record::EnergyInputs gpus;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  RunGpusOnNode(LaunchContextFor(assign), visible != nullptr ? visible : "", &gpus);
  std::error_code ec;
  std::filesystem::create_directories(context_.work_dir, ec);
  while (!cancelled()) {
    const auto edge = peer_energy_.WaitAsk(std::chrono::milliseconds(20));
    if (!edge) continue;
    PeerEnergyRead answer;
    answer.edge = *edge;
    answer.node = context_.agent_id;
    answer.gpus = gpus.gpus;
    answer.prefill = gpus.prefill;
    answer.read = ReadEnergyCounters(
        fmt::format("{}/{}.{}.worker{}.energy-{}.csv", context_.work_dir, run_id_, attempt_,
                    assign.getRank(), *edge == 0 ? "before" : "after"));
    peer_energy_.Answer(std::move(answer));
  }
  SetEnginePgids({});
  if (keep_on_release_.load() && !part->group.AnyExited()) {
    ++part->runs_served;
    std::lock_guard<std::mutex> lock(mutex_);
    kept_out_ = std::move(part);  // the agent keeps it for the group's next run
    return;
  }
  part->group.Stop(std::chrono::seconds(10));
}

void RunExecutor::StartWorkerPart(schema::Assign::Reader assign, EngineGroup& engines) {
  auto adapter = engines::MakeEngineAdapter(assign.getSpec().getEngine());
  if (!adapter) return;
  engines::LaunchContext launch_context = LaunchContextFor(assign);
  launch_context.self_executable = SelfExecutable();
  engines::EngineLaunch launch;
  const Status planned = adapter->Plan(launch_context, &launch);
  std::vector<engines::CheckVerdict> verdicts;
  engines::EngineCheckOptions check;
  check.work_dir = context_.work_dir;
  if (!planned.ok()) {
    spdlog::error("run {}: worker engine not started: {}", run_id_, planned.message());
  } else if (context_.engine_check &&
             engines::CheckProcesses(engines::ProcessesOf(launch, assign.getSpec()), check,
                                     &verdicts)
                 .ok() &&
             std::any_of(verdicts.begin(), verdicts.end(),
                         [](const engines::CheckVerdict& v) { return v.refused(); })) {
    // The head's check refuses the run the same way; its result carries the reason.
    for (const auto& v : verdicts) {
      if (v.refused())
        spdlog::error("run {}: worker engine not started: {}", run_id_, v.Describe());
    }
  } else if (!launch.processes.empty()) {
    std::filesystem::create_directories(context_.work_dir);
    const std::string log_prefix =
        fmt::format("{}/{}.{}.worker{}", context_.work_dir, run_id_, attempt_, assign.getRank());
    if (Status s = engines.Start(launch, log_prefix); !s.ok()) {
      spdlog::error("run {}: worker engine did not start: {}", run_id_, s.message());
    }
    SetEnginePgids(engines.Pgids());
  }
}

}  // namespace servesweep::agent
