#include "agent/run_executor.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "agent/engine_processes.h"
#include "agent/engines/engine_adapter.h"
#include "agent/gpu_telemetry.h"
#include "agent/http_get.h"
#include "agent/loadgen/answer_client.h"
#include "agent/loadgen/bench_metrics.h"
#include "agent/loadgen/load_generator.h"
#include "agent/record_builder.h"
#include "agent/scraper/metrics_scraper.h"
#include "common/clock.h"
#include "common/net.h"
#include "common/subprocess.h"

namespace servesweep::agent {
namespace {

constexpr double kReadyTimeoutCapS = 1800;
constexpr size_t kLogTailLines = 40;
constexpr int kGpuTelemetryIntervalMs = 1000;

}  // namespace

LaunchContext LaunchContextFor(schema::Assign::Reader assign) {
  LaunchContext context;
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
                       const std::string& api_key, long timeout_ms) {
  nlohmann::json body = {{"model", model}, {"max_tokens", 1}, {"stream", false}};
  if (chat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", "Hello"}}});
  } else {
    body["prompt"] = "Hello";
  }
  const std::string url = base_url + (chat ? "/v1/chat/completions" : "/v1/completions");
  HttpResponse response;
  if (Status s = HttpPostJson(url, body.dump(), timeout_ms, &response, api_key); !s.ok()) {
    return Status::Error(fmt::format("probe request failed: {}", s.message()));
  }
  const std::string excerpt = response.body.substr(0, 300);
  if (response.status_code != 200) {
    return Status::Error(fmt::format("probe request to {} answered HTTP {}: {}", url,
                                     response.status_code, excerpt));
  }
  const auto json = nlohmann::json::parse(response.body, nullptr, false);
  if (json.is_discarded() || !json.contains("choices") || !json["choices"].is_array() ||
      json["choices"].empty()) {
    return Status::Error(
        fmt::format("probe request to {} answered 200 without choices: {}", url, excerpt));
  }
  return Status::Ok();
}

RunExecutor::RunExecutor(schema::Assign::Reader assign, ExecutorContext context)
    : context_(std::move(context)) {
  assign_message_.setRoot(assign);
  run_id_ = assign.getSpec().getRunId();
  attempt_ = assign.getAttempt();
  role_ = assign.getRole();
  group_size_ = assign.getGroupSize();
  timeout_s_ = assign.getSpec().getTimeoutS();
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(message);
  }
  finished_.store(true);
}

void RunExecutor::ExecuteHead(schema::RunResult::Builder result) {
  auto assign = assign_message_.getRoot<schema::Assign>().asReader();
  const auto spec = assign.getSpec();
  auto fail = [&](const std::string& error) {
    result.setStatus(schema::RunStatus::FAILED);
    result.setError(error);
  };
  auto adapter = MakeEngineAdapter(spec.getEngine());
  if (!adapter)
    return fail(fmt::format("engine '{}' cannot be started on agent {}", spec.getEngine().cStr(),
                            context_.agent_id));
  LaunchContext launch_context = LaunchContextFor(assign);
  launch_context.port = FreeLoopbackPort();
  launch_context.self_executable = SelfExecutable();
  const EngineLaunch launch = adapter->Plan(launch_context);

  std::filesystem::create_directories(context_.work_dir);
  const std::string log_prefix = fmt::format("{}/{}.{}", context_.work_dir, run_id_, attempt_);
  NodeFacts node;
  node.gpu_model = context_.gpu_model;
  node.interconnect = context_.interconnect;
  node.engine_version = launch.version;
  if (launch.error.empty()) ReadProvenance(launch, log_prefix, &node);
  const bool local_engine = launch.error.empty() && !launch.processes.empty();
  if (local_engine) {
    const GpuProvenance gpu = ReadGpuProvenance(log_prefix, context_.agent_id);
    node.driver_version = gpu.driver_version;
    node.cuda_version = gpu.cuda_version;
    node.gpu_topology = gpu.topology;
    node.why_no_gpu_facts = gpu.why_missing;
    if (node.nccl_version.empty()) node.nccl_version = gpu.nccl_version;
  } else {
    node.why_no_gpu_facts = "no engine started on the agent";
  }
  FillConditions(spec, node, result.initRecord());
  if (!launch.error.empty()) return fail(fmt::format("engine not started: {}", launch.error));
  if (Status s = CheckPrograms(launch, context_.agent_id); !s.ok()) return fail(s.message());

  EngineGroup engines;
  // Declared after `engines`, so destroyed first: Cancel() never signals a reaped (reusable) pgid.
  struct PgidReset {
    RunExecutor& executor;
    ~PgidReset() { executor.SetEnginePgids({}); }
  } pgid_reset{*this};
  const int64_t spawn_ns = SteadyNowNs();
  if (Status s = engines.Start(launch, log_prefix); !s.ok()) return fail(s.message());
  SetEnginePgids(engines.Pgids());
  if (cancelled()) engines.Signal(SIGKILL);  // a cancel that raced the spawn
  auto engine_failure = [&](const std::string& what) {
    const auto exited = engines.FirstExit();
    result.setEngineLogTail(engines.LogTail(kLogTailLines));
    fail(fmt::format(
        "{}{}; engine log: {}", what,
        exited ? fmt::format(" ({} {})", exited->first, DescribeExit(exited->second)) : "",
        engines.LogPaths()));
  };

  // Readiness: /health answers 200 (where the engine has one), the model is listed, and one real
  // request is answered; cold start ends there.
  SetPhase("starting");
  // A second inside the run's own timeout, so an engine that never gets ready fails with that
  // reason rather than racing the agent's run watchdog.
  const double run_timeout_s = spec.getTimeoutS();
  const double ready_timeout_s =
      std::min(kReadyTimeoutCapS, run_timeout_s > 2 ? run_timeout_s - 1 : run_timeout_s);
  double cold_start_ms = std::numeric_limits<double>::quiet_NaN();
  while (!launch.health_path.empty()) {
    if (cancelled())
      return engine_failure("cancelled while the engine started: " + cancel_reason());
    if (engines.AnyExited()) return engine_failure("engine exited before it was ready");
    HttpResponse health;
    if (HttpGet(launch.base_url + launch.health_path, 1000, &health).ok() &&
        health.status_code == 200) {
      break;
    }
    if (static_cast<double>(SteadyNowNs() - spawn_ns) / 1e9 > ready_timeout_s) {
      return engine_failure(fmt::format("engine not ready after {:.0f} s", ready_timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  HttpResponse models;
  if (!HttpGet(launch.base_url + "/v1/models", 10000, &models, launch.api_key).ok() ||
      models.status_code != 200 ||
      models.body.find(fmt::format("\"{}\"", spec.getModel().cStr())) == std::string::npos) {
    return engine_failure(fmt::format("engine ready but /v1/models does not list '{}' (HTTP {})",
                                      spec.getModel().cStr(), models.status_code));
  }
  // One real request: an engine that lists its model may still fail to generate.
  {
    const double left_s = ready_timeout_s - static_cast<double>(SteadyNowNs() - spawn_ns) / 1e9;
    const long probe_timeout_ms = static_cast<long>(std::max(30.0, left_s) * 1000);
    if (Status s = ProbeCompletion(launch.base_url, spec.getModel().cStr(),
                                   spec.getWorkload().getApi() == schema::ApiKind::CHAT_COMPLETIONS,
                                   launch.api_key, probe_timeout_ms);
        !s.ok()) {
      return engine_failure(fmt::format("engine listed its model, but {}", s.message()));
    }
  }
  if (!launch.processes.empty()) {
    cold_start_ms = static_cast<double>(SteadyNowNs() - spawn_ns) / 1e6;
  }

  // Warm-up as its own phase, so neither the figures nor the engine signals include it.
  loadgen::LoadSettings settings = LoadSettingsFor(spec, launch.base_url);
  settings.api_key = launch.api_key;
  settings.reuse_connections = launch.reuse_connections;
  if (settings.warmup_requests > 0) {
    completed_.store(0);
    total_.store(settings.warmup_requests);
    SetPhase("warmup");
    loadgen::LoadSettings warmup = settings;
    warmup.num_requests = settings.warmup_requests;
    warmup.warmup_requests = 0;
    warmup.plan.clear();  // warm-up uses the mean lengths, closed loop
    warmup.sessions = 0;  // single synthetic prompts, whatever the measured phase sends
    warmup.custom_prompts.clear();
    warmup.ramp = loadgen::RampKind::kNone;
    warmup.drain_timeout_s = 0;
    if (warmup.concurrency == 0) warmup.concurrency = warmup.num_requests;
    warmup.seed = settings.seed ^ 0x5eed5eed5eed5eedULL;  // prompts unlike the measured ones
    const loadgen::BenchSummary warmup_summary = loadgen::Summarize(loadgen::RunLoad(
        warmup, [this](const loadgen::Progress& p) { completed_.store(p.completed); }));
    if (warmup_summary.completed == 0) {
      return engine_failure(fmt::format("all {} warm-up requests failed", warmup.num_requests));
    }
    settings.warmup_requests = 0;
  }
  if (cancelled()) return engine_failure("cancelled during warm-up: " + cancel_reason());

  // The measured phase, with /metrics scraped alongside.
  // Counts before the phase: a report between the two reads the old phase, never warm-up
  // counts under "measuring".
  completed_.store(0);
  total_.store(settings.num_requests);
  SetPhase("measuring");
  MetricsScraper scraper;
  const std::string metrics_url = !launch.metrics_url.empty() ? launch.metrics_url
                                  : launch.metrics_path.empty()
                                      ? std::string()
                                      : launch.base_url + launch.metrics_path;
  const int64_t measured_origin_ns = SteadyNowNs();
  if (!metrics_url.empty() && !launch.metrics_persona.empty()) {
    scraper.Start(metrics_url, launch.metrics_persona, 1000, measured_origin_ns);
  }
  GpuTelemetrySampler gpu_sampler;
  if (local_engine) {
    gpu_sampler.Start(log_prefix + ".gpu.csv", kGpuTelemetryIntervalMs, measured_origin_ns);
  }
  loadgen::LoadResult load = loadgen::RunLoad(
      settings, [this](const loadgen::Progress& p) { completed_.store(p.completed); });
  scraper.Stop();
  const bool gpu_sampled = gpu_sampler.available();
  gpu_sampler.Stop();
  // The quality gate: every task at temperature 0, after the measured phase (not timed, not in
  // the figures or the engine signals).
  std::optional<QualityScore> quality;
  if (spec.getQuality().getTasks().size() > 0 && !cancelled() && !engines.AnyExited()) {
    SetPhase("quality");
    loadgen::AnswerSettings ask;
    ask.base_url = launch.base_url;
    ask.api = settings.api;
    ask.model = spec.getModel();
    ask.api_key = launch.api_key;
    ask.max_tokens = spec.getQuality().getMaxTokens();
    ask.concurrency = settings.concurrency > 0 ? std::min<uint32_t>(8, settings.concurrency) : 8;
    std::vector<std::string> prompts;
    for (auto task : spec.getQuality().getTasks()) prompts.emplace_back(task.getPrompt());
    quality = ScoreQuality(spec, loadgen::AskAll(ask, prompts));
    if (quality->failed > 0) {
      spdlog::warn("run {}: {} of {} quality tasks got no answer (first error: {})", run_id_,
                   quality->failed, quality->tasks, quality->first_error);
    }
  }
  SetPhase("draining");
  // A crashed engine's sockets close a moment before the process can be reaped: requests already
  // fail ("connection refused") while waitpid still sees it alive, and a load that ends in that
  // window would call the run done. When a request failed, give the death a moment to show.
  const bool any_request_failed =
      std::any_of(load.requests.begin(), load.requests.end(),
                  [](const loadgen::RequestRecord& r) { return !r.success; });
  bool engine_died = engines.AnyExited();
  for (int wait = 0; !engine_died && any_request_failed && local_engine && wait < 25; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    engine_died = engines.AnyExited();
  }
  SetEnginePgids({});
  engines.Stop(std::chrono::seconds(10));

  loadgen::SloLimits slo;
  slo.ttft_ms = spec.getSlo().getTtftMs();
  slo.tpot_ms = spec.getSlo().getTpotMs();
  slo.e2el_ms = spec.getSlo().getE2elMs();
  const loadgen::BenchSummary summary = loadgen::Summarize(load, slo);
  auto samples = scraper.Samples();
  FillFigures(spec, summary, samples, cold_start_ms, result.getRecord());
  const auto gpu_samples = gpu_sampler.Samples();
  FillGpuTelemetry(gpu_samples,
                   !local_engine ? "no engine started on the agent"
                   : gpu_sampled ? "nvidia-smi printed no samples"
                   : node.why_no_gpu_facts.empty()
                       ? fmt::format("nvidia-smi did not start on agent {}", context_.agent_id)
                       : node.why_no_gpu_facts,
                   result.getRecord());
  samples.insert(samples.end(), gpu_samples.begin(), gpu_samples.end());
  if (quality) FillQuality(*quality, result.getRecord());

  auto requests = result.initRequests(static_cast<unsigned>(load.requests.size()));
  for (size_t i = 0; i < load.requests.size(); ++i)
    CopyRequestRecord(load.requests[i], requests[i]);
  auto engine_samples = result.initEngineSamples(static_cast<unsigned>(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    engine_samples[i].setAtNs(samples[i].at_ns);
    engine_samples[i].setName(samples[i].signal);
    engine_samples[i].setValue(samples[i].value);
  }
  if (summary.completed == 0) {
    std::string first_error = "none recorded";
    for (const auto& r : load.requests) {
      if (!r.error.empty()) {
        first_error = r.error;
        break;
      }
    }
    return engine_failure(fmt::format("no request succeeded ({} failed; first error: {})",
                                      summary.failed, first_error));
  }
  if (engine_died && !cancelled()) {
    return engine_failure(
        fmt::format("engine died during the run after {} completed request(s)", summary.completed));
  }
  result.setStatus(schema::RunStatus::OK);
}

void RunExecutor::ExecuteWorker() {
  auto assign = assign_message_.getRoot<schema::Assign>().asReader();
  auto adapter = MakeEngineAdapter(assign.getSpec().getEngine());
  EngineGroup engines;
  if (adapter) {
    LaunchContext launch_context = LaunchContextFor(assign);
    launch_context.self_executable = SelfExecutable();
    const EngineLaunch launch = adapter->Plan(launch_context);
    if (!launch.error.empty()) {
      spdlog::error("run {}: worker engine not started: {}", run_id_, launch.error);
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
  SetPhase("holding");
  while (!cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  SetEnginePgids({});
  engines.Stop(std::chrono::seconds(10));
}

}  // namespace servesweep::agent
