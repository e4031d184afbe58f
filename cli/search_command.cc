// `servesweep search MATRIX --out DIR`: the best configuration of the matrix under the SLO of its
// `search:` section (docs/search.md). Every configuration (a load ladder of the matrix) is first
// predicted by the performance model; search/search_loop.h decides what is worth running and
// which load level next; each round's runs are a sweep in DIR/rounds/NNN, on local agents or on
// agents started elsewhere (--bind: Slurm, Kubernetes), read back from its results.db (certified
// runs only). The answer: DIR/search.md and search.json.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "calibration/calibrate.h"
#include "cli/commands.h"
#include "cli/engine_checks.h"
#include "cli/local_agents.h"
#include "cli/local_sweep.h"
#include "cli/model_flags.h"
#include "cli/remote_agents.h"
#include "cli/sweep_driver.h"
#include "common/ids.h"
#include "coordinator/coordinator.h"
#include "matrix/feasibility.h"
#include "matrix/load_ladder.h"
#include "perfmodel/calibration.h"
#include "perfmodel/engine_profile.h"
#include "record/virtual_run.h"
#include "report/comparison.h"
#include "results/record_columns.h"
#include "results/results_store.h"
#include "search/prediction_bounds.h"
#include "search/search_answer.h"
#include "search/search_loop.h"

namespace servesweep::cli {
namespace {

namespace fs = std::filesystem;
using search::Figures;

struct SearchOptions {
  coordinator::CoordinatorSettings settings;
  DriverOptions driver;
  std::string matrix_path;
  uint32_t agents = 0, gpus_per_agent = 0;  // 0: the matrix's `local:`
  // Agents started elsewhere connect to settings.bind (as `coordinator`'s), `agents` of them,
  // instead of local ones.
  bool remote_agents = false;
  RemoteAgentKeys keys;
  size_t width = 0;  // configurations per round (0: one per agent)
  EngineCheckFlags check;
  ModelFlags model;
  bool predict_only = false;
  bool learn_band = false;
  bool learn = true;  // the "learn while searching"; --no-learn keeps the model
};

// --learn: a profile is fitted once this many counted runs cost it (fewer cannot move six
// coefficients), then again each time they have grown by kRefitGrowth (a fit's CPU time grows
// with its runs, so the fits of a whole search cost about 3x the last one's). The first fit scans
// each coefficient over x 1/20 .. x 20; a refit starts where the last fit left it, which half as
// many runs again move by far less, so it scans x 1/e .. x e in fewer evaluations. Measured by
// bench/search.sh (bookkeeping per round); 1.25 and 150 evaluations per fit cost 4x the CPU for
// the same winner.
constexpr size_t kMinFitRuns = 3;
constexpr double kRefitGrowth = 1.5;
constexpr perfmodel::FitOptions kFirstFit = {.max_evaluations = 150};
constexpr perfmodel::FitOptions kRefit = {
    .max_evaluations = 60, .initial_step = 0.25, .scan_sweeps = 1, .scan_points = 3,
    .scan_span = 1};

// One configuration: the runs of a load ladder, represented by its first run.
struct Configuration {
  schema::RunSpec::Reader spec;
  std::string ladder, label;
  size_t matrix_runs = 0;  // the exhaustive grid's runs of it (levels x repeats)
};

// The label's axis values without the load (concurrency, rate, lengths, repeat): the
// configuration's name.
std::string LabelWithoutLoad(const std::string& label) {
  static const char* kLoadKeys[] = {"concurrency",     "num_requests", "request_rate",
                                    "warmup_requests", "repeat",       "seed",
                                    "max_in_flight"};
  std::istringstream words(label);
  std::string word, out;
  while (words >> word) {
    const std::string key = word.substr(0, word.find('='));
    const bool load = std::any_of(std::begin(kLoadKeys), std::end(kLoadKeys),
                                  [&](const char* k) { return key.ends_with(k); });
    if (!load) out += (out.empty() ? "" : " ") + word;
  }
  return out.empty() ? "default" : out;
}

std::vector<Configuration> ConfigurationsOf(schema::Matrix::Reader matrix) {
  std::vector<Configuration> out;
  std::map<std::string, size_t> by_ladder;
  for (auto spec : matrix.getRuns()) {
    const std::string ladder = matrix::LoadLadderOf(spec);
    const auto [at, added] = by_ladder.emplace(ladder, out.size());
    if (added) out.push_back({spec, ladder, LabelWithoutLoad(spec.getLabel()), 0});
    ++out[at->second].matrix_runs;
  }
  return out;
}

// The configuration's run at `level`: its load set, its length at least requests_per_level x the
// level (and no less than the matrix asked for), over-saturation stopped early.
void BuildLevelSpec(const Configuration& c, const search::SearchSpec& spec, double level,
                    const std::string& run_id, uint32_t index, schema::RunSpec::Builder out) {
  auto w = out.getWorkload();
  if (spec.knob == search::LoadKnob::kConcurrency) {
    w.setConcurrency(static_cast<uint32_t>(level));
    w.setRequestRatePerS(0);
  } else {
    w.setRequestRatePerS(level);
  }
  const auto wanted = static_cast<uint32_t>(std::ceil(spec.requests_per_level * level));
  w.setNumRequests(std::max(c.spec.getWorkload().getNumRequests(), wanted));
  w.getEarlyStop().setOversaturated(true);
  out.setRunId(run_id);
  out.setIndex(index);
  out.setRepeat(0);
  out.setLabel(c.label + " " + search::DescribeLevel(spec, level));
}

Figures FiguresOf(schema::RunResult::Reader result) {
  Figures out;
  for (const auto& column : results::RecordColumns()) {
    const results::ColumnValue v = column.value(result);
    if (const double* d = std::get_if<double>(&v)) out[column.name] = *d;
    if (const int64_t* i = std::get_if<int64_t>(&v)) out[column.name] = static_cast<double>(*i);
  }
  return out;
}

class Searcher {
 public:
  Searcher(const SearchOptions& options, matrix::LoadedMatrix& matrix,
           const search::SearchSpec& spec, const record::VirtualRunOptions& model)
      : options_(options),
        matrix_(matrix),
        spec_(spec),
        model_(model),
        learned_(model),
        configurations_(ConfigurationsOf(matrix.matrix())) {}

  const std::vector<Configuration>& configurations() const { return configurations_; }

  // The model's figures of configuration `c` at `level` (a virtual run), as learned so far.
  Status Predict(size_t c, double level, Figures* out) const {
    return PredictWith(learned_, c, level, out);
  }
  // ... as the model the search began with (--predict-only's stand-in for reality).
  Status PredictAsFirst(size_t c, double level, Figures* out) const {
    return PredictWith(model_, c, level, out);
  }

  // --learn: every engine profile that costs configurations with counted runs is fitted again
  // (calibrate's fit of its default coefficients, from where the last fit left it) to those runs'
  // objective and constrained figures, once they are kMinFitRuns and each time they have grown
  // by kRefitGrowth; DIR/learned/NAME.yaml holds the latest fit. Whether one changed; `note`
  // says what was fitted and the fit's own error.
  bool Relearn(const std::vector<search::SearchStep>& counted, std::string* note) {
    std::map<std::string, perfmodel::EngineProfile> profiles;
    std::map<std::string, std::vector<calibration::CalibrationPoint>> points;
    for (const auto& step : counted) {
      perfmodel::EngineProfile profile;
      std::string why;
      const auto spec = configurations_[step.configuration].spec;
      if (!record::ChooseEngineProfile(spec, learned_, &profile, &why).ok()) continue;
      points[profile.name].push_back(PointOf(step));
      profiles.emplace(profile.name, std::move(profile));
    }
    bool changed = false;
    for (auto& [name, fitted_on] : points) {
      const size_t last = fitted_runs_[name];
      if (fitted_on.size() < std::max<double>(kMinFitRuns, kRefitGrowth * last)) continue;
      fitted_runs_[name] = fitted_on.size();
      calibration::CalibrateRequest request;
      request.points = std::move(fitted_on);
      request.profile = profiles[name];
      request.fit = calibration::DefaultFitCoefficients();
      request.fit_options = last == 0 ? kFirstFit : kRefit;
      request.fitted_by = "servesweep search --learn";
      request.fitted_at = UtcTimeText(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count())
                              .substr(0, 10);
      calibration::CalibrationReport report;
      const Status s = calibration::Calibrate(request, &report);
      if (!s.ok() || !report.fitted) {
        *note += fmt::format("{}{}: not fitted ({})", note->empty() ? "" : "; ", name,
                             s.ok() ? "no fit ran" : s.message());
        continue;
      }
      auto& mine = learned_.engine_profiles;
      const auto at =
          std::find_if(mine.begin(), mine.end(),
                       [&](const perfmodel::EngineProfile& p) { return p.name == name; });
      if (at != mine.end()) {
        *at = *report.profile;
      } else {
        mine.insert(mine.begin(), *report.profile);
      }
      changed = true;
      fs::create_directories(options_.settings.out_dir + "/learned");
      std::ofstream(fmt::format("{}/learned/{}.yaml", options_.settings.out_dir, name))
          << perfmodel::EngineProfileYaml(
                 *report.profile, fmt::format("Engine profile {} as `servesweep search --learn` "
                                              "fitted it on this search's {} counted runs\n",
                                              name, report.profile->calibration.points));
      *note += fmt::format(
          "{}{} fitted on {} runs ({} evaluations, {:.1f} s; its median abs error on them {:.1f}%)",
          note->empty() ? "" : "; ", name, report.profile->calibration.points,
          report.fit_evaluations, report.fit_seconds, report.profile->calibration.fit_error_pct);
    }
    return changed;
  }

  search::Prediction PredictConfiguration(size_t c) const {
    record::SimulatedRun sim;
    perfmodel::KindBand band;
    std::string kind = "uncalibrated";
    if (record::SimulateRun(configurations_[c].spec, model_, &sim).ok()) {
      band = sim.label.band;
      kind = perfmodel::ExtrapolationKindName(sim.label.kind);
    }
    return search::Predict(spec_, c, band, kind, [this](size_t i, double level, Figures* out) {
      return Predict(i, level, out);
    });
  }

  // The exhaustive grid's GPU-seconds as the model estimates them: every run of the matrix, one
  // cold start per configuration (its engine kept for the rest: engine_lifecycle's default).
  double ExhaustiveGpuSeconds(bool* known) const {
    double total = 0;
    *known = true;
    std::map<std::string, bool> started;
    for (auto run : matrix_.matrix().getRuns()) {
      record::SimulatedRun sim;
      if (!record::SimulateRun(run, model_, &sim).ok()) {
        *known = false;
        continue;
      }
      const double warmup =
          sim.completed > 0 ? double(run.getWorkload().getWarmupRequests()) / sim.completed : 0;
      double s = sim.duration_s * (1 + warmup);
      if (!started[run.getEngineConfiguration()]) s += sim.cold_start_s;
      started[run.getEngineConfiguration()] = true;
      total += s * run.getGpusNeeded();
    }
    return total;
  }

  // One round: its runs as a sweep of local agents in DIR/rounds/NNN (resumed when it is there).
  Status MeasureRound(int round, const std::vector<search::LevelRequest>& requests,
                      std::vector<search::LevelOutcome>* out) {
    const std::string dir = fmt::format("{}/rounds/{:03}", options_.settings.out_dir, round);
    matrix::LoadedMatrix sweep;
    const auto source = matrix_.matrix();
    auto runs = InitRoundMatrix(fmt::format("round {}", round), requests.size(), &sweep);
    std::vector<std::string> ids;
    for (size_t i = 0; i < requests.size(); ++i) {
      const Configuration& c = configurations_[requests[i].configuration];
      runs.setWithCaveats(static_cast<unsigned>(i), c.spec);
      const std::string id = fmt::format(
          "{}-search-{:03}-{:02}-{}", source.getName().cStr(), round, i,
          StableHashHex(fmt::format("{} {}", c.ladder, requests[i].level)).substr(0, 8));
      BuildLevelSpec(c, spec_, requests[i].level, id, static_cast<uint32_t>(i), runs[i]);
      ids.push_back(id);
    }
    const bool resumed = fs::exists(dir + "/results.db");
    if (!resumed || !Finished(dir, ids)) {
      if (Status s = Sweep(round, dir, resumed, sweep); !s.ok()) return s;
    }
    return ReadRound(dir, ids, search::UsesEnergy(spec_), out);
  }

  // The agents every round runs on, kept with their engines until StopAgents(): local ones,
  // started by the first round, or `agents` started elsewhere (remote_agents).
  void SetAgents(uint32_t agents, uint32_t gpus) {
    agents_ = agents;
    gpus_per_agent_ = gpus;
    if (!options_.remote_agents) {
      local_agents_ =
          std::make_unique<LocalAgents>(AgentsOptionsOf(LocalOptions(options_.settings)));
    }
  }
  // A sweep of this search's agents under `settings` (out_dir: where they and their runs live).
  LocalSweepOptions LocalOptions(const coordinator::CoordinatorSettings& settings) const {
    LocalSweepOptions local;
    local.settings = settings;
    local.driver = options_.driver;
    local.agents = agents_;
    local.gpus_per_agent = gpus_per_agent_;
    local.skip_engine_check = options_.check.skip;
    return local;
  }
  void StopAgents() {
    if (local_agents_) local_agents_->Stop(std::chrono::seconds(0));
    if (options_.remote_agents) SayFarewell();
  }
  // GPU-seconds the agents' GPUs were held between rounds by the engines they kept, while the
  // search chose the next round (at most: every agent's GPUs, whether it kept one or not).
  double KeptIdleGpuSeconds() const { return idle_between_rounds_s_ * agents_ * gpus_per_agent_; }

 private:
  Status PredictWith(const record::VirtualRunOptions& options, size_t c, double level,
                     Figures* out) const {
    capnp::MallocMessageBuilder message;
    message.setRoot(configurations_[c].spec);
    auto run = message.getRoot<schema::RunSpec>();
    BuildLevelSpec(configurations_[c], spec_, level, "predicted", 0, run);
    capnp::MallocMessageBuilder result_message;
    auto result = result_message.initRoot<schema::RunResult>();
    record::ExecuteVirtualRun(run.asReader(), options, result);
    if (result.getStatus() != schema::RunStatus::OK) {
      return Status::FailedPrecondition(result.getError().cStr());
    }
    *out = FiguresOf(result.asReader());
    return Status::Ok();
  }

  // A counted run as a calibration point: its spec at its level, the objective's column and the
  // constrained ones (the success rate aside: nothing in the model moves it) as measured. The
  // model's energy is an upper bound, never fitted to: under an energy objective the fit reads
  // the output tok/s per GPU it is the inverse of.
  calibration::CalibrationPoint PointOf(const search::SearchStep& step) const {
    calibration::CalibrationPoint p;
    p.id = step.run_id;
    p.case_name = p.source = "this search's runs";
    p.spec = std::make_shared<capnp::MallocMessageBuilder>();
    const Configuration& c = configurations_[step.configuration];
    p.spec->setRoot(c.spec);
    BuildLevelSpec(c, spec_, step.level, step.run_id, 0, p.spec->getRoot<schema::RunSpec>());
    std::string objective = search::InfoOf(spec_.objective).column;
    if (objective.empty()) objective = "goodput";
    if (search::IsUpperBoundOnly(objective)) objective = "output_throughput_per_gpu";
    std::vector<std::string> columns = {objective};
    for (const auto& k : spec_.constraints) {
      if (k.column != "success_rate" && !search::IsUpperBoundOnly(k.column)) {
        columns.push_back(k.column);
      }
    }
    for (const std::string& column : columns) {
      const auto at = step.figures.find(column);
      if (at == step.figures.end() || !(at->second > 0) || !std::isfinite(at->second)) continue;
      if (std::find(p.metrics.begin(), p.metrics.end(), column) != p.metrics.end()) continue;
      p.metrics.push_back(column);
      p.measured.push_back(at->second);
    }
    return p;
  }

  // A round already measured to its end (`--resume`): read back, nothing started.
  static bool Finished(const std::string& dir, const std::vector<std::string>& ids) {
    std::unique_ptr<results::ResultsStore> store;
    std::vector<results::StoredRun> runs;
    if (!results::ResultsStore::Open(dir + "/results.db", &store).ok() ||
        !store->LoadRuns(&runs).ok() || runs.size() != ids.size()) {
      return false;
    }
    return std::all_of(runs.begin(), runs.end(), [&](const results::StoredRun& r) {
      const bool final = r.state == results::RunState::kDone ||
                         r.state == results::RunState::kFailed ||
                         r.state == results::RunState::kSkipped;
      return final && std::find(ids.begin(), ids.end(), r.run_id) != ids.end();
    });
  }

  // The round's matrix in *sweep: the search's matrix without its runs, its hash made the
  // round's (`name`), and room for `runs` runs.
  capnp::List<schema::RunSpec>::Builder InitRoundMatrix(const std::string& name, size_t runs,
                                                        matrix::LoadedMatrix* sweep) const {
    sweep->local = matrix_.local;
    sweep->cluster = matrix_.cluster;
    sweep->text = matrix_.text;
    auto m = sweep->message.initRoot<schema::Matrix>();
    const auto source = matrix_.matrix();
    m.setName(source.getName());
    m.setSourcePath(source.getSourcePath());
    m.setSourceHash(StableHashHex(fmt::format("{} {}", source.getSourceHash().cStr(), name)));
    m.setProbes(source.getProbes());
    return m.initRuns(static_cast<unsigned>(runs));
  }

  // Agents started elsewhere wait for a next coordinator after each round's bye (it said
  // stay): an empty sweep on the same endpoint, DIR/rounds/end, tells each that says hello
  // within the wait that none follows, so it stops its engine and leaves.
  void SayFarewell() {
    coordinator::CoordinatorSettings settings = options_.settings;
    settings.out_dir = options_.settings.out_dir + "/rounds/end";
    fs::remove_all(settings.out_dir);
    settings.wait_for_agents = agents_;
    settings.wait_for_agents_ms = std::max(10'000, 2 * settings.heartbeat_ms * settings.liveness);
    matrix::LoadedMatrix empty;
    InitRoundMatrix("end", 0, &empty);
    zmq::context_t context;
    coordinator::Coordinator coordinator(settings, context);
    Status s = coordinator.Prepare(empty);
    if (s.ok()) s = coordinator.Bind();
    if (s.ok()) s = coordinator.Run();
    if (!s.ok()) {
      spdlog::warn(
          "could not tell the agents the search is over ({}): each stops its engine "
          "when its job ends",
          s.message());
    }
  }

  Status Sweep(int round, const std::string& dir, bool resumed, matrix::LoadedMatrix& sweep) {
    LocalSweepOptions local = LocalOptions(options_.settings);
    local.settings.out_dir = dir;
    local.settings.resume = resumed;
    local.kept_agents = local_agents_.get();
    spdlog::info("search round {}: {} run(s) in {}{}", round, sweep.matrix().getRuns().size(), dir,
                 resumed ? " (resumed)" : "");
    const auto begun = std::chrono::steady_clock::now();
    if (last_sweep_end_) {
      idle_between_rounds_s_ += std::chrono::duration<double>(begun - *last_sweep_end_).count();
    }
    coordinator::CoordinatorSettings remote = local.settings;
    remote.next_sweep_follows = true;
    const int code = options_.remote_agents ? DriveSweep(remote, options_.driver, sweep, {})
                                            : RunLocalSweep(local, sweep);
    last_sweep_end_ = std::chrono::steady_clock::now();
    if (code == kExitInterrupted) return Status::Cancelled("interrupted");
    if (code != kExitOk && code != kExitRunsFailed) {
      return Status::FailedPrecondition(fmt::format("the sweep in {} did not finish", dir));
    }
    return Status::Ok();
  }

  // Each run of the round as the search counts it: certified figures, or why not.
  // Under an energy objective or constraint (`energy`), a run whose energy is not valid is not
  // counted either.
  static Status ReadRound(const std::string& dir, const std::vector<std::string>& ids, bool energy,
                          std::vector<search::LevelOutcome>* out) {
    std::vector<report::ComparedRun> measured;
    if (Status s = report::LoadComparedRuns(dir, &measured); !s.ok()) return s;
    for (const std::string& id : ids) {
      search::LevelOutcome o;
      o.run_id = id;
      const auto at = std::find_if(measured.begin(), measured.end(),
                                   [&](const report::ComparedRun& r) { return r.run_id == id; });
      if (at == measured.end() || !at->ok) {
        // The coordinator already retried what was transient: what is left stays.
        o.not_counted = "failed (its error is in " + dir + "/results.db)";
        o.permanent = true;
      } else if (at->validity == schema::Validity::INVALID) {
        o.not_counted = "invalid: " + at->validity_reasons;
      } else if (at->client_bound) {
        o.not_counted = "client-bound: " + at->client_bound_reasons;
      } else if (energy && !results::EnergyValid(at->figures)) {
        // Where the GPUs' energy cannot be read (no counter, GPUs shared): at the next level
        // neither.
        o.not_counted = "energy not valid: " + at->energy_invalid_reason;
        o.permanent = true;
      }
      if (at != measured.end()) {
        o.figures = at->figures;
        const auto attempt = at->figures.find("attempt_s"), gpus = at->figures.find("gpu_count");
        if (attempt != at->figures.end() && gpus != at->figures.end()) {
          o.gpu_s = attempt->second * gpus->second;
        }
      }
      out->push_back(std::move(o));
    }
    return Status::Ok();
  }

  const SearchOptions& options_;
  matrix::LoadedMatrix& matrix_;
  const search::SearchSpec& spec_;
  const record::VirtualRunOptions& model_;
  record::VirtualRunOptions learned_;          // model_, its profiles fitted again by --learn
  std::map<std::string, size_t> fitted_runs_;  // profile -> the runs its last fit had
  std::vector<Configuration> configurations_;
  uint32_t agents_ = 1, gpus_per_agent_ = 1;
  std::unique_ptr<LocalAgents> local_agents_;
  std::optional<std::chrono::steady_clock::time_point> last_sweep_end_;
  double idle_between_rounds_s_ = 0;
};

int Search(const SearchOptions& options) {
  matrix::LoadedMatrix matrix;
  search::SearchSpec spec;
  Status s = matrix::LoadMatrixFile(options.matrix_path, &matrix);
  if (s.ok()) s = search::ParseSearchSpec(options.matrix_path, matrix.text, &spec);
  record::VirtualRunOptions model;
  if (s.ok()) s = VirtualRunOptionsFrom(options.model, &model);
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return kExitError;
  }
  const uint32_t agents = options.agents > 0 ? options.agents : matrix.local.agents;
  const uint32_t gpus =
      options.gpus_per_agent > 0 ? options.gpus_per_agent : matrix.local.gpus_per_agent;
  if (options.remote_agents && options.predict_only) {
    spdlog::error("--bind with --predict-only: expected one or the other (nothing runs)");
    return kExitError;
  }
  if (!options.predict_only) {
    // Agents started elsewhere say what they hold when they connect (submit checked it).
    if (const int code = options.remote_agents
                             ? -1
                             : RefuseUnplaceable(matrix, options.matrix_path, agents, gpus);
        code >= 0) {
      return code;
    }
    if (const int code = RefuseRejectedSweep(matrix, options.check); code >= 0) return code;
  }
  const std::string& out = options.settings.out_dir;
  if (fs::exists(out + "/search.json") && !options.settings.resume) {
    spdlog::error(
        "{}: expected a new output folder, found a finished search (search.json); "
        "choose another --out",
        out);
    return kExitError;
  }
  if (fs::exists(out + "/rounds") && !options.settings.resume) {
    spdlog::error(
        "{}: expected a new output folder, found a search's rounds; add --resume to "
        "finish it",
        out);
    return kExitError;
  }
  fs::create_directories(out);
  Searcher searcher(options, matrix, spec, model);
  searcher.SetAgents(agents, gpus);
  const auto& configurations = searcher.configurations();
  std::vector<search::Prediction> predictions;
  for (size_t c = 0; c < configurations.size(); ++c) {
    predictions.push_back(searcher.PredictConfiguration(c));
  }
  search::SearchSettings settings;
  // Side by side as the agents hold them: one configuration per agent unless told.
  settings.learn_band = options.learn_band;
  if (options.learn) {
    settings.relearn = [&](const std::vector<search::SearchStep>& counted, std::string* note) {
      return searcher.Relearn(counted, note);
    };
  }
  settings.width = options.width > 0 ? options.width : std::max<uint32_t>(agents, 1);
  const auto started = std::chrono::steady_clock::now();
  settings.elapsed_s = [started] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const search::PredictLevel predict = [&](size_t c, double level, Figures* f) {
    return searcher.Predict(c, level, f);
  };
  const search::MeasureRound measure = [&](int round,
                                           const std::vector<search::LevelRequest>& requests,
                                           std::vector<search::LevelOutcome>* outcomes) {
    if (options.predict_only) {
      // The model stands in for reality: the search's path as the model sees it.
      for (const auto& r : requests) {
        search::LevelOutcome o;
        if (Status st = searcher.PredictAsFirst(r.configuration, r.level, &o.figures); !st.ok()) {
          o.not_counted = st.message();
          o.permanent = true;
        } else {
          // Virtual GPU-seconds: the measured phase on the run's GPUs (no cold start).
          o.gpu_s = o.figures["duration_s"] * o.figures["gpu_count"];
        }
        outcomes->push_back(std::move(o));
      }
      return Status::Ok();
    }
    return searcher.MeasureRound(round, requests, outcomes);
  };
  const search::SearchResult result =
      search::RunSearch(spec, predictions, settings, predict, measure);
  searcher.StopAgents();  // and the engines they kept
  bool exhaustive_known = false;
  const double exhaustive = searcher.ExhaustiveGpuSeconds(&exhaustive_known);
  search::SearchAnswer answer{spec,
                              {},
                              result,
                              exhaustive,
                              exhaustive_known,
                              options.predict_only,
                              searcher.KeptIdleGpuSeconds()};
  for (const Configuration& c : configurations) {
    answer.configurations.push_back({c.label, c.ladder, c.spec.getGpusNeeded()});
  }
  std::ofstream(out + "/search.json") << search::SearchAnswerJson(answer).dump(2) << "\n";
  std::ofstream(out + "/search.svg") << search::SearchPathSvg(answer) << "\n";
  const std::string md = search::SearchAnswerMarkdown(answer);
  std::ofstream(out + "/search.md") << md;
  std::ofstream(out + "/report.html") << search::SearchAnswerHtml(answer, md);
  fmt::print("{}\nsearch: {}/search.md\nhtml:   {}/report.html\njson:   {}/search.json\n", md, out,
             out, out);
  if (result.stopped_by.starts_with("round")) {
    spdlog::error("{}", result.stopped_by);
    return result.stopped_by.ends_with("interrupted") ? kExitInterrupted : kExitError;
  }
  return result.winner ? kExitOk : kExitRunsFailed;
}

}  // namespace

void AddSearchCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<SearchOptions>();
  auto* cmd = app.add_subcommand(
      "search", "Find the matrix's best configuration under its search: section's SLO");
  cmd->add_option("matrix", o->matrix_path, "Experiment matrix (YAML) with a search: section")
      ->required();
  AddCoordinatorOptions(*cmd, o->settings, o->driver);
  AddModelFlags(*cmd, o->model);
  AddEngineCheckFlags(*cmd, o->check, true);
  cmd->add_option("--agents", o->agents,
                  "Local agents to start, or with --bind the agents that connect (default: the "
                  "matrix's local.agents)");
  cmd->add_option("--gpus-per-agent", o->gpus_per_agent,
                  "Emulated GPUs per local agent (default: the matrix's local.gpus_per_agent)");
  cmd->add_option("--width", o->width,
                  "Configurations measured side by side per round (default: one per agent)");
  cmd->add_flag("--insecure", o->settings.insecure,
                "Plain TCP between the coordinator and its agents");
  cmd->add_option("--bind", o->settings.bind,
                  "Serve the rounds to agents started elsewhere (by hand, Slurm, Kubernetes) on "
                  "this ZeroMQ endpoint instead of starting local ones; every round binds it");
  AddRemoteAgentKeyOptions(*cmd, o->keys);
  cmd->add_flag("--predict-only", o->predict_only,
                "Search the performance model's figures only: the ranking and path it predicts, "
                "nothing run");
  cmd->add_flag("--learn-band", o->learn_band,
                "Keep the model as it is (no --learn) and, once 3 configurations have run, bound "
                "the rest by its error on this search's own runs instead of the shipped band "
                "(docs/search.md)");
  cmd->add_flag("--learn,!--no-learn", o->learn,
                "Fit the model's engine profiles again on the counted runs after every round, "
                "predict and rank again what has not started, and bound it by the fitted "
                "models' errors on runs they had not seen (the default; --no-learn keeps the "
                "model and its shipped band, docs/search.md)");
  cmd->callback([o, cmd, exit_code] {
    o->remote_agents = cmd->count("--bind") > 0;
    if (o->learn_band) o->learn = false;  // the two bound what is left by different errors
    if (!o->remote_agents && (!o->keys.secret_key.empty() || !o->keys.allowed_keys.empty())) {
      spdlog::error(
          "--secret-key/--allowed-keys without --bind: expected --bind for agents started "
          "elsewhere (local agents get keys made for them)");
      *exit_code = kExitError;
      return;
    }
    if (Status s = ApplyRemoteAgentKeys(o->keys, &o->settings); !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    *exit_code = Search(*o);
  });
}

}  // namespace servesweep::cli
