#include "record/virtual_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "common/clock.h"
#include "loadgen/arrival_schedule.h"
#include "loadgen/bench_metrics.h"
#include "loadgen/early_stop_source.h"
#include "loadgen/request_source.h"
#include "perfmodel/calibration.h"
#include "perfmodel/run_deployment.h"
#include "perfmodel/simulate.h"
#include "record/record_builder.h"
#include "record/run_energy.h"
#include "record/run_settings.h"

namespace servesweep::record {
namespace {

constexpr int64_t kSampleIntervalNs = 100'000'000;  // as the scraper's default 100 ms

// The spec's requests: lengths from its plan (trace or distributions) or fixed; arrivals from
// the trace, the open-loop schedule (same seed as the load generator), or the closed loop. As the
// load generator, `max_in_flight` caps an open loop (a replayed trace included): a request due
// while the cap is reached waits on the client. Duration mode: the open-loop schedule up to the
// window's end, or a closed loop that keeps sending until then.
perfmodel::Workload WorkloadFor(schema::RunSpec::Reader spec, const loadgen::LoadSettings& load) {
  const schema::Workload::Reader w = spec.getWorkload();
  perfmodel::Workload out;
  out.sample_interval_ns = kSampleIntervalNs;
  const bool open_loop = w.getRequestRatePerS() > 0 || w.getRamp().size() > 0;
  if (w.getDurationS() > 0) {
    const auto end_ns = static_cast<int64_t>(std::llround((load.warmup_s + load.duration_s) * 1e9));
    std::vector<int64_t> arrivals;
    if (open_loop) {
      loadgen::ArrivalProcess process(workload::ArrivalKindFor(load), load.burstiness,
                                      workload::RateProfileFor(load, 0), w.getSeed());
      for (int64_t t = process.NextNs(); t < end_ns; t = process.NextNs()) arrivals.push_back(t);
      out.max_in_flight = static_cast<int>(w.getMaxInFlight());
    } else {
      arrivals.assign(std::max<uint32_t>(1, w.getConcurrency()), 0);
      out.concurrency = static_cast<int>(std::max<uint32_t>(1, w.getConcurrency()));
      out.repeat_until_ns = end_ns;
      if (!load.adapters.empty()) {
        out.adapter_of = [load](uint64_t i) {
          return workload::AdapterOf(load, static_cast<uint32_t>(i));
        };
      }
    }
    for (size_t i = 0; i < arrivals.size(); ++i) {
      out.requests.push_back({i,
                              arrivals[i],
                              static_cast<int32_t>(w.getInputLenTok()),
                              static_cast<int32_t>(w.getOutputLenTok()),
                              {},
                              workload::AdapterOf(load, static_cast<uint32_t>(i))});
    }
    return out;
  }
  const uint32_t n = w.getNumRequests();
  const auto plan = w.getPlan();
  const bool has_plan = plan.size() == n && n > 0;
  std::vector<int64_t> arrivals(n, 0);
  if (open_loop) {
    // The load generator's own schedule: constant gaps and ramps included.
    arrivals = loadgen::ScheduleNs(workload::ArrivalKindFor(load), load.burstiness,
                                   workload::RateProfileFor(load, n), n, w.getSeed());
    out.max_in_flight = static_cast<int>(w.getMaxInFlight());
  } else if (has_plan && w.getReplayArrivals() && w.getTrace().size() > 0) {
    for (uint32_t i = 0; i < n; ++i) arrivals[i] = plan[i].getOffsetNs();
    out.max_in_flight = static_cast<int>(w.getMaxInFlight());
  } else {
    out.concurrency = static_cast<int>(w.getConcurrency());
  }
  for (uint32_t i = 0; i < n; ++i) {
    perfmodel::RequestSpec r;
    r.id = i;
    r.arrival_ns = arrivals[i];
    r.input_tok = static_cast<int32_t>(has_plan ? plan[i].getInputLenTok() : w.getInputLenTok());
    r.output_tok = static_cast<int32_t>(has_plan ? plan[i].getOutputLenTok() : w.getOutputLenTok());
    r.adapter = workload::AdapterOf(load, i);  // the adapter the load generator would send
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
// empty) says which requests share a prefix with one sent before (by arrival). Duration mode
// (window_ns > 0 at [warmup_ns, warmup_ns + window_ns)): requests due before the window are
// warm-up, as the load generator flags them.
loadgen::LoadResult LoadResultOf(const perfmodel::SimulationResult& sim,
                                 capnp::List<schema::PlannedRequest>::Reader plan,
                                 int64_t warmup_ns, int64_t window_ns,
                                 const std::vector<workload::AdapterRequest>& adapters) {
  loadgen::LoadResult load;
  for (const auto& a : adapters) load.adapter_names.push_back(a.name);
  int64_t last_done_ns = -1, last_send_ns = 0;
  load.requests.reserve(sim.requests.size());
  for (const auto& r : sim.requests) {
    loadgen::RequestRecord out;
    out.chunk_times_ns.reserve(r.chunks.size());
    out.chunk_tokens.reserve(r.chunks.size());
    out.index = static_cast<uint32_t>(r.id);
    out.prompt_tokens = static_cast<uint32_t>(r.input_tok);
    out.adapter = r.adapter;
    out.scheduled_ns = r.scheduled_ns;
    out.start_ns = r.arrival_ns;
    out.sent_ns = r.arrival_ns;  // the model has no client: sent when started
    out.warmup = window_ns > 0 && r.scheduled_ns < warmup_ns;
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
    if (!out.warmup) {
      last_done_ns = std::max(last_done_ns, out.done_ns);
      last_send_ns = std::max(last_send_ns, out.start_ns);
    }
    load.requests.push_back(std::move(out));
  }
  load.window_start_ns = window_ns > 0 ? warmup_ns : 0;
  load.window_end_ns = window_ns > 0 ? warmup_ns + window_ns : last_send_ns;
  load.duration_s = last_done_ns >= load.window_start_ns
                        ? static_cast<double>(last_done_ns - load.window_start_ns) / 1e9
                        : 0;
  if (plan.size() > 0) {  // count mode: each request's index is its place in the plan
    std::vector<size_t> by_arrival(load.requests.size());
    for (size_t i = 0; i < by_arrival.size(); ++i) by_arrival[i] = i;
    std::stable_sort(by_arrival.begin(), by_arrival.end(), [&](size_t a, size_t b) {
      return load.requests[a].start_ns < load.requests[b].start_ns;
    });
    std::unordered_set<uint64_t> sent;
    for (size_t i : by_arrival) {
      const uint32_t at = load.requests[i].index;
      if (at >= plan.size() || plan[at].getPrefixBlocks().size() == 0) continue;
      load.requests[i].prefix_seen = sent.insert(plan[at].getPrefixBlocks()[0]).second ? 0 : 1;
    }
  }
  return load;
}

// The model's snapshots as the scraper's samples, under servesweep's signal names.
std::vector<scraper::ScrapedSample> SamplesOf(const perfmodel::SimulationResult& sim) {
  std::vector<scraper::ScrapedSample> out;
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

Status ChooseEngineProfile(schema::RunSpec::Reader spec, const VirtualRunOptions& options,
                           perfmodel::EngineProfile* out, std::string* why) {
  const std::string architecture =
      options.engine_profiles.empty() ? "" : perfmodel::ModelArchitectureOf(spec);
  for (const auto& p : options.engine_profiles) {
    if ((p.engine == spec.getEngine().cStr() || p.engine == "any") &&
        perfmodel::ProfileCoversArchitecture(p, architecture)) {
      *out = p;
      why->clear();
      if (spec.getEngineVersion().size() > 0 &&
          !perfmodel::InVersionRange(p.versions, spec.getEngineVersion())) {
        *why = fmt::format("{} {} is outside {}'s versions", spec.getEngine().cStr(),
                           spec.getEngineVersion().cStr(), p.name);
      }
      return Status::Ok();
    }
  }
  return perfmodel::EngineProfileFor(spec, out, why);
}

namespace {

// Profiles, deployment and the simulation of one run; the load generator's view of it.
struct Simulation {
  perfmodel::HardwareProfile hardware;
  perfmodel::ModelProfile model;
  perfmodel::EngineProfile engine;
  std::string engine_why;  // how the engine profile was chosen, when not an exact match
  perfmodel::DeploymentConfig deployment;
  perfmodel::SimulationResult result;
  loadgen::LoadResult load;
  double cold_start_ms = 0;
  RunSettings settings;  // derived once from the spec
};

Status Simulate(schema::RunSpec::Reader spec, const VirtualRunOptions& options, Simulation* out) {
  // Turns wait on answers' text, which the model does not produce.
  const auto w = spec.getWorkload();
  if (w.getSessions() > 0) {
    return Status::InvalidArgument(
        "a virtual run cannot simulate sessions (multi-turn: each turn sends the previous "
        "answers' text, which the performance model does not produce); use num_requests or "
        "duration_s");
  }
  const std::string hardware_name = spec.getSim().getHardware().size() > 0
                                        ? std::string(spec.getSim().getHardware())
                                        : options.default_hardware;
  if (hardware_name.empty()) {
    return Status::InvalidArgument(
        "expected sim.hardware in the matrix or --hardware (e.g. h200), found neither");
  }
  out->settings = RunSettingsFor(spec, "");
  std::string model_name;
  if (Status s = perfmodel::LoadHardwareProfile(hardware_name, &out->hardware); !s.ok()) return s;
  if (Status s = perfmodel::ResolveModelProfileName(spec, &model_name); !s.ok()) return s;
  if (Status s = perfmodel::LoadModelProfile(model_name, &out->model); !s.ok()) return s;
  if (Status s = ChooseEngineProfile(spec, options, &out->engine, &out->engine_why); !s.ok()) {
    return s;
  }
  out->deployment = perfmodel::DeploymentFor(spec, out->engine, &out->hardware);
  perfmodel::CostModel cost;
  if (Status s = perfmodel::CostModel::Create(out->hardware, out->model, out->deployment, &cost);
      !s.ok()) {
    return s;
  }
  out->cold_start_ms = static_cast<double>(cost.ColdStartNs()) / 1e6;
  perfmodel::Workload workload = WorkloadFor(spec, out->settings.load);
  if (Status s = perfmodel::SimulateWorkload(out->hardware, out->model, out->deployment, workload,
                                             &out->result);
      !s.ok()) {
    return s;
  }
  const auto warmup_ns = static_cast<int64_t>(std::llround(w.getWarmupS() * 1e9));
  const auto window_ns = static_cast<int64_t>(std::llround(w.getDurationS() * 1e9));
  out->load =
      LoadResultOf(out->result, w.getPlan(), warmup_ns, window_ns, out->settings.load.adapters);
  const workload::EarlyStopSettings& early_stop = out->settings.load.early_stop;
  if (!early_stop.enabled()) return Status::Ok();
  // The phase as the load generator's EarlyStopSource would have cut it: judged on the whole
  // simulation, then simulated again with only the requests sent before the stop (the model is
  // causal, so the verdict holds for the shorter run; its drain has no later arrivals).
  const bool watch_in_flight = workload::IsOpenLoop(out->settings.load) && w.getMaxInFlight() == 0;
  int64_t stopped_at_ns = -1;
  const loadgen::StopVerdict verdict =
      loadgen::JudgeAfterTheFact(out->load.requests, early_stop, watch_in_flight,
                                 window_ns > 0 ? warmup_ns : 0, &stopped_at_ns);
  if (stopped_at_ns < 0) return Status::Ok();
  std::unordered_set<uint64_t> sent;
  for (const auto& r : out->result.requests) {
    if (r.arrival_ns < stopped_at_ns) sent.insert(r.id);
  }
  std::erase_if(workload.requests,
                [&](const perfmodel::RequestSpec& r) { return !sent.contains(r.id); });
  if (workload.repeat_until_ns > 0) {
    workload.repeat_until_ns = std::min(workload.repeat_until_ns, stopped_at_ns);
  }
  if (Status s = perfmodel::SimulateWorkload(out->hardware, out->model, out->deployment, workload,
                                             &out->result);
      !s.ok()) {
    return s;
  }
  out->load =
      LoadResultOf(out->result, w.getPlan(), warmup_ns, window_ns, out->settings.load.adapters);
  if (window_ns > 0) out->load.window_end_ns = std::min(out->load.window_end_ns, stopped_at_ns);
  out->load.stopped = verdict.reason;
  out->load.stop_evidence = verdict.evidence;
  out->load.stopped_at_s = verdict.at_s;
  return Status::Ok();
}

std::string LayoutOf(const perfmodel::DeploymentConfig& d) {
  return perfmodel::LayoutName(d.tp, d.pp, d.dp * d.dp_attention, d.ep, d.dp_attention > 1,
                               d.prefill_instances, d.decode_instances);
}

perfmodel::RunShape ShapeOf(const Simulation& sim, const loadgen::BenchSummary& summary) {
  const double n = summary.completed > 0 ? summary.completed : 1;
  return {sim.model.name,
          sim.hardware.name,
          LayoutOf(sim.deployment),
          static_cast<double>(summary.total_input_tokens) / n,
          static_cast<double>(summary.total_output_tokens) / n,
          summary.request_throughput * summary.e2el_ms.mean / 1e3};
}

// The model's typical error on pairs no profile was fitted to: the fallback profile's, measured
// on the fidelity suite (profiles/engines/default.yaml).
double UnfittedErrorPct() {
  static const double pct = [] {
    perfmodel::EngineProfile fallback;
    return perfmodel::LoadEngineProfile("default", &fallback).ok()
               ? fallback.calibration.typical_error_pct
               : 0.0;
  }();
  return pct;
}

// The run's standing, its kind of extrapolation and that kind's cross-validated band; the
// standing is "calibrated" exactly when the kind is "in range".
CalibrationLabel LabelOf(const Simulation& sim, const perfmodel::RunShape& shape,
                         const VirtualRunOptions& options) {
  CalibrationLabel label;
  const perfmodel::Calibration& c = sim.engine.calibration;
  label.kind = perfmodel::ClassifyRun(c, shape);
  // A profile chosen for another version of the run's engine is at least that far.
  if (!sim.engine_why.empty() && c.fitted &&
      label.kind < perfmodel::ExtrapolationKind::kOtherVersion) {
    label.kind = perfmodel::ExtrapolationKind::kOtherVersion;
  }
  label.band =
      (options.error_bands ? *options.error_bands : perfmodel::ShippedErrorBands()).For(label.kind);
  if (!c.fitted) {
    label.calibration = fmt::format("{} (uncalibrated)", sim.engine.name);
    label.error_pct = c.typical_error_pct;
    label.standing =
        fmt::format("uncalibrated: engine profile {} was not fitted to measurements{}{}",
                    sim.engine.name, sim.engine_why.empty() ? "" : "; ", sim.engine_why);
    return label;
  }
  label.calibration =
      fmt::format("{} (fitted {} on {} points)", sim.engine.name, c.fitted_at, c.points);
  label.error_pct = c.fit_error_pct;
  if (label.kind == perfmodel::ExtrapolationKind::kInRange) {
    label.standing = "calibrated";
    return label;
  }
  std::string outside;
  perfmodel::InCalibratedRange(c, shape, &outside);
  label.standing = fmt::format("extrapolated: {}{}{}", sim.engine_why,
                               sim.engine_why.empty() || outside.empty() ? "" : "; ", outside);
  // Outside its fit a profile's own error says little (a 2% fit on one model can miss another
  // by 2x): expect at least what the model misses by where it was not fitted.
  label.error_pct = std::max(label.error_pct, UnfittedErrorPct());
  return label;
}

}  // namespace

Status RunShapeOf(schema::RunSpec::Reader spec, const VirtualRunOptions& options,
                  double mean_input_tok, double mean_output_tok, double mean_in_flight,
                  perfmodel::RunShape* out) {
  out->hardware = spec.getSim().getHardware().size() > 0 ? std::string(spec.getSim().getHardware())
                                                         : options.default_hardware;
  perfmodel::HardwareProfile hardware;
  if (Status s = perfmodel::LoadHardwareProfile(out->hardware, &hardware); !s.ok()) return s;
  out->hardware = hardware.name;
  std::string model_name;
  if (Status s = perfmodel::ResolveModelProfileName(spec, &model_name); !s.ok()) return s;
  perfmodel::ModelProfile model;
  if (Status s = perfmodel::LoadModelProfile(model_name, &model); !s.ok()) return s;
  out->model = model.name;
  out->layout = LayoutOf(perfmodel::DeploymentFor(spec));
  out->input_tok = mean_input_tok;
  out->output_tok = mean_output_tok;
  out->load = mean_in_flight;
  return Status::Ok();
}

Status SimulateRun(schema::RunSpec::Reader spec, const VirtualRunOptions& options,
                   SimulatedRun* out) {
  Simulation sim;
  if (Status s = Simulate(spec, options, &sim); !s.ok()) return s;
  out->hardware = sim.hardware.name;
  out->model = sim.model.name;
  out->engine_profile = sim.engine.name;
  out->cold_start_s = sim.cold_start_ms / 1e3;
  out->max_power_w = sim.hardware.max_power_w;
  out->duration_s = sim.load.duration_s;
  out->completed = static_cast<uint32_t>(sim.result.final_snapshot.finished);
  out->rejected = static_cast<uint32_t>(sim.result.final_snapshot.rejected);
  out->stopped = sim.load.stopped;
  out->stop_evidence = sim.load.stop_evidence;
  out->label = LabelOf(sim, ShapeOf(sim, loadgen::Summarize(sim.load)), options);
  return Status::Ok();
}

Status SimulateRun(schema::RunSpec::Reader spec, const std::string& default_hardware,
                   SimulatedRun* out) {
  return SimulateRun(spec, VirtualRunOptions{default_hardware, {}, std::nullopt}, out);
}

void ExecuteVirtualRun(schema::RunSpec::Reader spec, const VirtualRunOptions& options,
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
  if (Status s = Simulate(spec, options, &sim); !s.ok()) return fail(s.message());

  NodeFacts node;
  node.gpu_model = fmt::format("{} (simulated)", sim.hardware.name);
  node.interconnect = "simulated";
  node.engine_version = "perfmodel";
  node.why_no_gpu_facts = "simulated run";
  auto record = result.initRecord();
  FillConditions(spec, node, sim.settings.load, record);
  FillGpuTelemetry({}, "simulated run", record);
  const loadgen::BenchSummary summary = loadgen::Summarize(sim.load, sim.settings.slo);
  const std::vector<scraper::ScrapedSample> samples = SamplesOf(sim.result);
  FillFigures(spec, summary, samples, sim.cold_start_ms, record);
  FillEnergy(EnergyAtMaxPower(sim.hardware.name, sim.hardware.max_power_w, spec.getGpusNeeded(),
                              sim.load.duration_s),
             record);
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
    CopyRequestRecord(sim.load.requests[i], requests[i], sim.load.adapter_names);
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
  const CalibrationLabel label = LabelOf(sim, ShapeOf(sim, summary), options);
  record.setCalibration(label.calibration);
  record.setCalibrationErrorPct(label.error_pct);
  record.setCalibrationStanding(label.standing);
  record.setCalibrationKind(perfmodel::ExtrapolationKindName(label.kind));
  record.setCalibrationBandLowPct(label.band.known() ? label.band.low_pct
                                                     : std::numeric_limits<double>::quiet_NaN());
  record.setCalibrationBandHighPct(label.band.known() ? label.band.high_pct
                                                      : std::numeric_limits<double>::quiet_NaN());
  if (summary.completed == 0) {
    return fail(fmt::format("no request completed ({} rejected: they never fit in the KV cache)",
                            summary.failed));
  }
  result.setStatus(schema::RunStatus::OK);
  result.setFinishedAtUnixMs(UnixNowMs());
}

void ExecuteVirtualRun(schema::RunSpec::Reader spec, const std::string& default_hardware,
                       schema::RunResult::Builder result) {
  ExecuteVirtualRun(spec, VirtualRunOptions{default_hardware, {}, std::nullopt}, result);
}

}  // namespace servesweep::record
