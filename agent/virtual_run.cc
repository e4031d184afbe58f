#include "agent/virtual_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "agent/loadgen/arrival_schedule.h"
#include "agent/loadgen/bench_metrics.h"
#include "agent/loadgen/request_source.h"
#include "agent/record_builder.h"
#include "common/clock.h"
#include "perfmodel/run_deployment.h"
#include "perfmodel/simulate.h"

namespace servesweep::agent {
namespace {

constexpr int64_t kSampleIntervalNs = 100'000'000;  // as the scraper's default 100 ms

// The spec's requests: lengths from its plan (trace or distributions) or fixed; arrivals from
// the trace, the open-loop schedule (same seed as the load generator), or the closed loop.
perfmodel::Workload WorkloadFor(schema::RunSpec::Reader spec) {
  const schema::Workload::Reader w = spec.getWorkload();
  perfmodel::Workload out;
  const uint32_t n = w.getNumRequests();
  const auto plan = w.getPlan();
  const bool has_plan = plan.size() == n && n > 0;
  std::vector<int64_t> arrivals(n, 0);
  if (w.getRequestRatePerS() > 0 || w.getRamp().size() > 0) {
    // The load generator's own schedule: constant gaps and ramps included.
    const loadgen::LoadSettings load = workload::LoadSettingsFor(spec, "");
    arrivals = loadgen::ScheduleNs(loadgen::ArrivalKindFor(load), load.burstiness,
                                   loadgen::RateProfileFor(load, n), n, w.getSeed());
    out.max_in_flight = static_cast<int>(w.getMaxInFlight());
  } else if (has_plan && w.getReplayArrivals() && w.getTrace().size() > 0) {
    for (uint32_t i = 0; i < n; ++i) arrivals[i] = plan[i].getOffsetNs();
    out.max_in_flight = static_cast<int>(w.getMaxInFlight());
  } else {
    out.concurrency = static_cast<int>(w.getConcurrency());
  }
  out.sample_interval_ns = kSampleIntervalNs;
  for (uint32_t i = 0; i < n; ++i) {
    perfmodel::RequestSpec r;
    r.id = i;
    r.arrival_ns = arrivals[i];
    r.input_tok = static_cast<int32_t>(has_plan ? plan[i].getInputLenTok() : w.getInputLenTok());
    r.output_tok = static_cast<int32_t>(has_plan ? plan[i].getOutputLenTok() : w.getOutputLenTok());
    if (has_plan) {
      // The full blocks of a shared prefix, as an engine's prefix cache keys them: the ids are
      // already prefix ids (equal leading ids = equal leading tokens), in 512-token blocks, the
      // model's default block size.
      const auto blocks = plan[i].getPrefixBlocks();
      const uint32_t full = std::min<uint32_t>(blocks.size(), plan[i].getPrefixLenTok() / 512);
      for (uint32_t b = 0; b < full; ++b) r.block_hashes.push_back(blocks[b]);
    }
    out.requests.push_back(std::move(r));
  }
  return out;
}

// What the load generator would have recorded for each simulated request; `plan` (may be
// empty) says which requests share a prefix with one sent before (by arrival).
loadgen::LoadResult LoadResultOf(const perfmodel::SimulationResult& sim,
                                 capnp::List<schema::PlannedRequest>::Reader plan) {
  loadgen::LoadResult load;
  int64_t first_ns = -1, last_ns = 0;
  for (const auto& r : sim.requests) {
    loadgen::RequestRecord out;
    out.index = static_cast<uint32_t>(r.id);
    out.prompt_tokens = static_cast<uint32_t>(r.input_tok);
    out.scheduled_ns = r.arrival_ns;
    out.start_ns = r.arrival_ns;
    out.sent_ns = r.arrival_ns;  // the model has no client: sent as scheduled
    out.success = !r.rejected && r.finish_ns >= 0;
    if (r.rejected) out.error = "rejected by the model: the request never fits in the KV cache";
    for (const auto& chunk : r.chunks) {
      out.chunk_times_ns.push_back(chunk.time_ns);
      out.chunk_tokens.push_back(static_cast<uint32_t>(chunk.tokens));
      out.output_tokens += static_cast<uint32_t>(chunk.tokens);
    }
    if (!r.chunks.empty()) {
      out.first_token_ns = r.first_token_ns;
      out.end_ns = r.chunks.back().time_ns;
    }
    out.done_ns = out.success ? r.finish_ns : r.arrival_ns;
    first_ns = first_ns < 0 ? out.start_ns : std::min(first_ns, out.start_ns);
    last_ns = std::max(last_ns, out.done_ns);
    load.requests.push_back(std::move(out));
  }
  load.duration_s = first_ns < 0 ? 0 : static_cast<double>(last_ns - first_ns) / 1e9;
  if (plan.size() == load.requests.size()) {
    std::vector<size_t> by_arrival(load.requests.size());
    for (size_t i = 0; i < by_arrival.size(); ++i) by_arrival[i] = i;
    std::stable_sort(by_arrival.begin(), by_arrival.end(), [&](size_t a, size_t b) {
      return load.requests[a].start_ns < load.requests[b].start_ns;
    });
    std::unordered_set<uint64_t> sent;
    for (size_t i : by_arrival) {
      if (plan[i].getPrefixBlocks().size() == 0) continue;
      load.requests[i].prefix_seen = sent.insert(plan[i].getPrefixBlocks()[0]).second ? 0 : 1;
    }
  }
  return load;
}

// The model's snapshots as the scraper's samples, under servesweep's signal names.
std::vector<ScrapedSample> SamplesOf(const perfmodel::SimulationResult& sim) {
  std::vector<ScrapedSample> out;
  for (const auto& s : sim.samples) {
    out.push_back({s.time_ns, "kv_cache_usage", s.kv_usage});
    out.push_back({s.time_ns, "running", static_cast<double>(s.running)});
    out.push_back({s.time_ns, "waiting", static_cast<double>(s.waiting)});
    out.push_back({s.time_ns, "preemptions", static_cast<double>(s.preemptions)});
    out.push_back({s.time_ns, "prefix_cache_hits", static_cast<double>(s.prefix_hits_tok)});
    out.push_back({s.time_ns, "prefix_cache_queries", static_cast<double>(s.prefix_queries_tok)});
    out.push_back({s.time_ns, "generation_tokens", static_cast<double>(s.generation_tok)});
    out.push_back({s.time_ns, "prompt_tokens", static_cast<double>(s.prompt_tok)});
  }
  return out;
}

}  // namespace

namespace {

// Profiles, deployment and the simulation of one run; the load generator's view of it.
struct Simulation {
  perfmodel::HardwareProfile hardware;
  perfmodel::ModelProfile model;
  perfmodel::SimulationResult result;
  loadgen::LoadResult load;
  double cold_start_ms = 0;
};

Status Simulate(schema::RunSpec::Reader spec, const std::string& default_hardware,
                Simulation* out) {
  // The model replays a fixed list of requests: no timed window, no turns that wait on answers.
  const auto w = spec.getWorkload();
  if (w.getDurationS() > 0 || w.getSessions() > 0) {
    return Status::InvalidArgument(fmt::format(
        "a virtual run cannot simulate {} (the performance model replays a fixed list of "
        "requests); use num_requests",
        w.getDurationS() > 0 ? "duration_s (a timed window)" : "sessions (multi-turn)"));
  }
  const std::string hardware_name = spec.getSim().getHardware().size() > 0
                                        ? std::string(spec.getSim().getHardware())
                                        : default_hardware;
  if (hardware_name.empty()) {
    return Status::InvalidArgument(
        "expected sim.hardware in the matrix or --hardware (e.g. h200), found neither");
  }
  std::string model_name;
  if (Status s = perfmodel::LoadHardwareProfile(hardware_name, &out->hardware); !s.ok()) return s;
  if (Status s = perfmodel::ResolveModelProfileName(spec, &model_name); !s.ok()) return s;
  if (Status s = perfmodel::LoadModelProfile(model_name, &out->model); !s.ok()) return s;
  const perfmodel::DeploymentConfig deployment = perfmodel::DeploymentFor(spec);
  perfmodel::CostModel cost;
  if (Status s = perfmodel::CostModel::Create(out->hardware, out->model, deployment, &cost);
      !s.ok()) {
    return s;
  }
  out->cold_start_ms = static_cast<double>(cost.ColdStartNs()) / 1e6;
  if (Status s = perfmodel::SimulateWorkload(out->hardware, out->model, deployment,
                                             WorkloadFor(spec), &out->result);
      !s.ok()) {
    return s;
  }
  out->load = LoadResultOf(out->result, spec.getWorkload().getPlan());
  return Status::Ok();
}

}  // namespace

Status SimulateRun(schema::RunSpec::Reader spec, const std::string& default_hardware,
                   SimulatedRun* out) {
  Simulation sim;
  if (Status s = Simulate(spec, default_hardware, &sim); !s.ok()) return s;
  out->hardware = sim.hardware.name;
  out->model = sim.model.name;
  out->cold_start_s = sim.cold_start_ms / 1e3;
  out->duration_s = sim.load.duration_s;
  out->completed = static_cast<uint32_t>(sim.result.final_snapshot.finished);
  out->rejected = static_cast<uint32_t>(sim.result.final_snapshot.rejected);
  return Status::Ok();
}

void ExecuteVirtualRun(schema::RunSpec::Reader spec, const std::string& default_hardware,
                       schema::RunResult::Builder result) {
  result.setRunId(spec.getRunId());
  result.setAttempt(1);
  result.setAgentId("virtual");
  result.setSpec(spec);
  result.setStartedAtUnixMs(UnixNowMs());
  auto fail = [&](const std::string& why) {
    result.setStatus(schema::RunStatus::FAILED);
    result.setError(fmt::format("simulation: {}", why));
    result.setFinishedAtUnixMs(UnixNowMs());
  };
  Simulation sim;
  if (Status s = Simulate(spec, default_hardware, &sim); !s.ok()) return fail(s.message());

  NodeFacts node;
  node.gpu_model = fmt::format("{} (simulated)", sim.hardware.name);
  node.interconnect = "simulated";
  node.engine_version = "perfmodel";
  node.why_no_gpu_facts = "simulated run";
  auto record = result.initRecord();
  FillConditions(spec, node, record);
  FillGpuTelemetry({}, "simulated run", record);
  loadgen::SloLimits slo;
  slo.ttft_ms = spec.getSlo().getTtftMs();
  slo.tpot_ms = spec.getSlo().getTpotMs();
  slo.e2el_ms = spec.getSlo().getE2elMs();
  const loadgen::BenchSummary summary = loadgen::Summarize(sim.load, slo);
  const std::vector<ScrapedSample> samples = SamplesOf(sim.result);
  FillFigures(spec, summary, samples, sim.cold_start_ms, record);
  // The same gate as a measured run's; with no engine counters to check against, a simulated
  // run is at best "not reconciled".
  ValidityInputs gate;
  for (const auto& r : sim.load.requests) gate.requests.push_back(&r);
  gate.measured = summary.completed + summary.failed;
  gate.completed = summary.completed;
  gate.measured_output_tok = summary.total_output_tokens;
  gate.min_success_rate = spec.getMinSuccessRate();
  FillValidity(JudgeValidity(gate), record);
  auto requests = result.initRequests(static_cast<unsigned>(sim.load.requests.size()));
  for (size_t i = 0; i < sim.load.requests.size(); ++i) {
    CopyRequestRecord(sim.load.requests[i], requests[i]);
  }
  // The model's signal series, as a measured run ships its scrapes (report.html plots them).
  auto engine_samples = result.initEngineSamples(static_cast<unsigned>(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    engine_samples[i].setAtNs(samples[i].at_ns);
    engine_samples[i].setName(samples[i].signal);
    engine_samples[i].setValue(samples[i].value);
  }
  record.setMeasuredScrapes(static_cast<uint32_t>(sim.result.samples.size()));  // one per snapshot
  record.setSimulation(
      fmt::format("perfmodel: hardware {}, model {}", sim.hardware.name, sim.model.name));
  if (summary.completed == 0) {
    return fail(fmt::format("no request completed ({} rejected: they never fit in the KV cache)",
                            summary.failed));
  }
  result.setStatus(schema::RunStatus::OK);
  result.setFinishedAtUnixMs(UnixNowMs());
}

}  // namespace servesweep::agent
