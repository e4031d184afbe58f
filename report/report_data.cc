#include "report/report_data.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "perfmodel/profiles.h"
#include "perfmodel/step_cost.h"
#include "results/record_columns.h"
#include "results/result_reads.h"

namespace servesweep::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Figure(const std::map<std::string, double>& figures, const std::string& name) {
  auto it = figures.find(name);
  return it == figures.end() ? kNaN : it->second;
}

// The hardware profile of a run: the simulator's, else the shipped profile whose name the GPU
// model contains ("NVIDIA H200" -> h200); "" when none fits.
std::string HardwareProfileFor(schema::RunSpec::Reader spec, const std::string& gpu_model) {
  if (spec.getSim().getHardware().size() > 0) return spec.getSim().getHardware();
  std::string lower = gpu_model;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string best;
  for (const std::string& name : perfmodel::ShippedHardwareProfiles()) {
    if (name.find('-') == std::string::npos && lower.find(name) != std::string::npos &&
        name.size() > best.size()) {
      best = name;
    }
  }
  return best;
}

}  // namespace

std::optional<double> RooflineTpotMs(schema::RunSpec::Reader spec, const std::string& gpu_model) {
  const std::string hardware_name = HardwareProfileFor(spec, gpu_model);
  if (hardware_name.empty()) return std::nullopt;
  std::string model_name = spec.getSim().getModelProfile();
  if (model_name.empty() && !perfmodel::InferModelProfileName(spec.getModel(), &model_name).ok()) {
    return std::nullopt;
  }
  perfmodel::HardwareProfile hardware;
  perfmodel::ModelProfile model;
  if (!perfmodel::LoadHardwareProfile(hardware_name, &hardware).ok() ||
      !perfmodel::LoadModelProfile(model_name, &model).ok()) {
    return std::nullopt;
  }
  perfmodel::DeploymentConfig d;
  d.tp = static_cast<int>(spec.getLayout().getTp());
  d.pp = static_cast<int>(spec.getLayout().getPp());
  if (spec.getPrecision().size() > 0) d.precision = spec.getPrecision();
  if (spec.getKvCacheDtype().size() > 0) d.kv_dtype = spec.getKvCacheDtype();
  perfmodel::CostModel cost;
  if (!perfmodel::CostModel::Create(hardware, model, d, &cost).ok()) return std::nullopt;
  const auto w = spec.getWorkload();
  const int64_t context = w.getInputLenTok() + w.getOutputLenTok() / 2;
  return static_cast<double>(cost.Step({{context, 1, 1}}).total_ns) / 1e6;
}

std::string ConfigName(const std::string& label) {
  std::istringstream tokens(label);
  std::string out;
  for (std::string t; tokens >> t;) {
    // The level, its sample size (a sweep often scales num_requests with the level) and the
    // repeat are not the configuration.
    if (t.rfind("concurrency=", 0) == 0 || t.rfind("request_rate=", 0) == 0 ||
        t.rfind("num_requests=", 0) == 0 || t.rfind("repeat=", 0) == 0) {
      continue;
    }
    out += (out.empty() ? "" : " ") + t;
  }
  return out;
}

namespace {

// What the phases of LoadReportData pass on to the diagnosis, per run id: the stored specs (for
// the roofline estimate), GPU models, and the requests and preemption samples of each run.
struct ReportInputs {
  std::vector<kj::Array<capnp::word>> specs;  // by run position
  std::map<std::string, std::string> gpu_model_of;
  std::map<std::string, std::vector<PromptTtft>> prompt_ttft;
  std::map<std::string, std::vector<RequestStart>> starts;
  std::map<std::string, std::vector<CounterSample>> preemptions;
};

// Runs: configuration, level, cost, SLO attainment.
Status ReadRuns(results::ResultsStore& store, ReportData* out, ReportInputs* in) {
  if (Status s = LoadComparedRuns(store, &out->compared); !s.ok()) return s;
  std::vector<results::StoredRun> stored;
  if (Status s = store.LoadRuns(&stored); !s.ok()) return s;
  if (stored.size() != out->compared.size()) {
    return Status::Unavailable(
        "runs changed while the report was read; run `servesweep report` again");
  }
  if (Status s = results::LoadSimulationKind(store, &out->simulation); !s.ok()) return s;
  if (Status s = results::LoadGpuModels(store, &in->gpu_model_of); !s.ok()) return s;
  std::map<std::string, std::string> name_of_key;  // configuration key -> unique name
  std::set<std::string> names;
  for (size_t i = 0; i < stored.size(); ++i) {
    ReportRun r;
    r.run = out->compared[i];
    auto words = kj::heapArray<capnp::word>(stored[i].spec_bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), stored[i].spec_bytes.data(), words.size() * sizeof(capnp::word));
    kj::Maybe<kj::Exception> corrupt = kj::runCatchingExceptions([&]() {
      capnp::FlatArrayMessageReader reader(words);
      const auto spec = reader.getRoot<schema::RunSpec>();
      const auto w = spec.getWorkload();
      r.level = w.getRequestRatePerS() > 0 ? w.getRequestRatePerS() : w.getConcurrency();
      out->open_loop = out->open_loop || w.getRequestRatePerS() > 0;
      const results::Price price = results::PriceOf(spec.getEngineConfig());
      r.currency = price.currency;
      const auto& f = r.run.figures;
      results::CostInputs cost;
      cost.gpu_count = Figure(f, "gpu_count");
      cost.duration_s = Figure(f, "duration_s");
      cost.completed = Figure(f, "completed");
      cost.input_tok = Figure(f, "total_input_tokens");
      cost.output_tok = Figure(f, "total_output_tokens");
      cost.cached_input_tok = Figure(f, "prefix_cache_hits");
      if (r.run.ok) r.cost = results::CostOf(price, cost);
    });
    if (corrupt != nullptr) {
      return Status::Internal(fmt::format("the stored spec of run {} is unreadable", r.run.run_id));
    }
    in->specs.push_back(std::move(words));
    // The key: every condition and system field but the load level and the sample size.
    std::string key;
    for (const auto* fields : {&r.run.conditions, &r.run.system}) {
      for (const Field& field : *fields) {
        if (field.name.rfind("load.", 0) == 0 || field.name == "window.requests") continue;
        key += field.name + "=" + field.value + "\n";
      }
    }
    if (!name_of_key.count(key)) {
      std::string name = ConfigName(r.run.label);
      if (name.empty()) name = "all runs";
      const std::string base = name;
      for (int n = 2; names.count(name); ++n) name = fmt::format("{} #{}", base, n);
      names.insert(name);
      name_of_key[key] = name;
    }
    r.config = name_of_key[key];
    r.used = out->selection.Uses(r.run);
    auto& f = r.run.figures;
    if (r.run.ok) {
      f["per_user_tok_per_s"] = PerUserTokPerS(Figure(f, "tpot_median_ms"));
      r.slo_attainment = SloAttainment(Figure(f, "goodput"), Figure(f, "duration_s"),
                                       Figure(f, "completed"), Figure(f, "failed"));
    }
    out->runs.push_back(std::move(r));
  }
  return Status::Ok();
}

// Curves over the ok runs: knee, best SLO point, Pareto frontier per configuration.
void BuildConfigCurves(ReportData* out) {
  std::vector<CurveRun> curve_runs;
  for (const auto& r : out->runs) {
    if (!r.used) continue;
    CurveRun run{r.config, r.level, r.run.figures, r.slo_attainment};
    if (!results::EnergyValid(run.figures)) {
      std::erase_if(run.figures, [](const auto& f) { return results::IsEnergyColumn(f.first); });
    }
    curve_runs.push_back(std::move(run));
  }
  for (Curve& curve : BuildCurves(curve_runs)) {
    ConfigCurve c;
    std::vector<double> levels, throughput;
    std::vector<XY> pareto, energy;
    for (const auto& p : curve.points) {
      levels.push_back(p.level);
      throughput.push_back(p.Median("output_throughput"));
      pareto.push_back({p.Median("per_user_tok_per_s"), p.Median("output_throughput_per_gpu")});
      // Less energy is better: the frontier of its negative.
      energy.push_back({p.Median("per_user_tok_per_s"), -p.Median("energy_per_output_tok_j")});
    }
    c.knee = FindKnee(levels, throughput);
    c.slo = FindBestSloPoint(curve, "output_throughput");
    c.frontier = ParetoFrontier(pareto);
    c.energy_frontier = ParetoFrontier(energy);
    c.curve = std::move(curve);
    out->curves.push_back(std::move(c));
  }
}

// Engine signals and requests, for the plots and the per-run rules.
Status ReadSignalsAndRequests(results::ResultsStore& store, ReportData* out, ReportInputs* in) {
  std::vector<results::EngineSample> samples;
  std::vector<results::RequestTtft> requests;
  if (Status s = results::LoadPlottedSignals(store, &samples); !s.ok()) return s;
  if (Status s = results::LoadRequestTtfts(store, &requests); !s.ok()) return s;
  std::map<std::string, std::map<std::string, std::vector<XY>>> series;
  for (const auto& sample : samples) {
    series[sample.run_id][sample.name].push_back(
        {static_cast<double>(sample.at_ns) / 1e9, sample.value});
    if (sample.name == "preemptions") {
      in->preemptions[sample.run_id].push_back({sample.at_ns, sample.value});
    }
  }
  for (const auto& r : requests) {
    in->prompt_ttft[r.run_id].push_back({r.prompt_tok, r.ttft_ms});
    in->starts[r.run_id].push_back({r.start_ns, r.prompt_tok});
  }
  for (const auto& r : out->runs) {
    if (!r.run.ok) continue;
    const auto scrapes = r.run.figures.find("measured_scrapes");
    if (scrapes != r.run.figures.end() && scrapes->second < kMinPlottedScrapes) {
      out->unsampled.push_back({r.run.label, static_cast<uint32_t>(scrapes->second)});
      continue;
    }
    if (!series.count(r.run.run_id)) continue;
    if (out->signals.size() >= kMaxSignalRuns) {
      ++out->signal_runs_left_out;
      continue;
    }
    SignalSeries s{r.run.label, series[r.run.run_id]};
    // The preemption counter as its increase since the first sample.
    auto& counter = s.signals["preemptions"];
    const double first = counter.empty() ? 0 : counter.front().y;
    for (auto& point : counter) point.y -= first;
    out->signals.push_back(std::move(s));
  }
  return Status::Ok();
}

// Per-run rules: one finding per rule and configuration (its lowest level that fired), saying
// how many other runs fired too.
void DiagnoseRuns(ReportInputs& in, ReportData* out) {
  std::map<std::pair<std::string, std::string>, std::pair<Finding, int>> per_run;
  std::vector<std::pair<std::string, std::string>> order;
  auto add_run_finding = [&](const ReportRun& r, std::optional<Finding> f) {
    if (!f) return;
    const auto key = std::make_pair(f->rule, r.config);
    auto it = per_run.find(key);
    if (it == per_run.end()) {
      per_run[key] = {*f, 0};
      order.push_back(key);
    } else {
      ++it->second.second;
    }
  };
  std::vector<size_t> by_level(out->runs.size());
  for (size_t i = 0; i < by_level.size(); ++i) by_level[i] = i;
  std::stable_sort(by_level.begin(), by_level.end(),
                   [&](size_t a, size_t b) { return out->runs[a].level < out->runs[b].level; });
  for (size_t i : by_level) {
    const ReportRun& r = out->runs[i];
    if (!r.used) continue;
    const auto& f = r.run.figures;
    const double hits = Figure(f, "prefix_cache_hits"), queries = Figure(f, "prefix_cache_queries");
    PrefillSignals signals{queries > 0 ? hits / queries : kNaN, Figure(f, "waiting_max"),
                           Figure(f, "warmup_requests")};
    const std::string subject = r.run.label;
    add_run_finding(r, TtftGrowsWithPromptLength(subject, in.prompt_ttft[r.run.run_id], signals));
    add_run_finding(r, LongPromptsEvict(subject, in.preemptions[r.run.run_id],
                                        in.starts[r.run.run_id], Figure(f, "kv_cache_usage_max")));
  }
  for (const auto& key : order) {
    Finding f = per_run[key].first;
    if (per_run[key].second > 0) {
      f.evidence +=
          fmt::format(" (and {} other run(s) of this configuration)", per_run[key].second);
    }
    out->findings.push_back(std::move(f));
  }
}

// Per-configuration rules over the curves.
void DiagnoseCurves(ReportInputs& in, ReportData* out) {
  for (const ConfigCurve& c : out->curves) {
    const std::string& config = c.curve.config;
    const CurvePoint& lowest = c.curve.points.front();
    if (!out->open_loop && lowest.level == 1) {
      // The first ok run of this configuration at concurrency 1 gives the spec for the roofline.
      std::optional<double> roofline;
      for (size_t i = 0; i < out->runs.size(); ++i) {
        const ReportRun& r = out->runs[i];
        if (r.config != config || r.level != 1 || !r.used) continue;
        capnp::FlatArrayMessageReader reader(in.specs[i]);
        roofline = RooflineTpotMs(reader.getRoot<schema::RunSpec>(), in.gpu_model_of[r.run.run_id]);
        break;
      }
      if (auto f = DecodeSlowAtConcurrencyOne(config, lowest.Median("tpot_median_ms"), roofline)) {
        out->findings.push_back(std::move(*f));
      }
    }
    if (auto f = ThroughputPlateaus(config, c.curve, c.knee)) out->findings.push_back(*f);
    if (auto f = P95RisesWhileOutputImproves(config, c.curve)) out->findings.push_back(*f);
  }
}

}  // namespace

Status LoadReportData(results::ResultsStore& store, ReportData* out,
                      const RunSelection& selection) {
  *out = ReportData();
  out->selection = selection;
  ReportInputs in;
  if (Status s = ReadRuns(store, out, &in); !s.ok()) return s;
  BuildConfigCurves(out);
  if (Status s = ReadSignalsAndRequests(store, out, &in); !s.ok()) return s;
  DiagnoseRuns(in, out);
  DiagnoseCurves(in, out);
  return Status::Ok();
}

}  // namespace servesweep::report
