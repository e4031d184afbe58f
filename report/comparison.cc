#include "report/comparison.h"

#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/array.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "results/record_columns.h"
#include "results/results_store.h"

namespace servesweep::report {
namespace {

// The figures a comparison shows, and which direction is better.
struct FigureColumn {
  const char* column;
  bool higher_is_better;
};
constexpr FigureColumn kFigures[] = {
    {"request_throughput", true},
    {"output_throughput", true},
    {"output_throughput_per_gpu", true},
    {"goodput", true},
    {"success_rate", true},
    {"ttft_median_ms", false},
    {"ttft_p99_ms", false},
    {"tpot_median_ms", false},
    {"itl_median_ms", false},
    {"e2el_median_ms", false},
    {"e2el_p99_ms", false},
    {"quality_accuracy", true},
    {"cost_per_completed_request", false},
    {"cost_per_mtok_output", false},
    {"energy_per_output_tok_j", false},
    {"energy_per_request_j", false},
};

std::string Number(double v) { return fmt::format("{}", v); }

std::string Get(const std::map<std::string, std::string>& record, const std::string& key) {
  auto it = record.find(key);
  return it == record.end() ? "" : it->second;
}

// One configuration of a sweep: its runs differ only in their repeat number.
struct Configuration {
  std::string label;
  const ComparedRun* first = nullptr;        // the first ok run, else the first run
  std::vector<const ComparedRun*> ok_runs;   // the ok runs the selection uses
  std::vector<const ComparedRun*> left_out;  // ok runs it does not (invalid, client-bound)
};

std::string WithoutRepeat(const std::string& label) {
  static const std::regex repeat(R"( ?repeat=\d+)");
  std::string out = std::regex_replace(label, repeat, "");
  return out.empty() ? "default" : out;
}

std::vector<Configuration> Configurations(const std::vector<ComparedRun>& runs,
                                          const RunSelection& selection) {
  std::vector<Configuration> out;
  for (const auto& run : runs) {
    const std::string label = WithoutRepeat(run.label);
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const Configuration& c) { return c.label == label; });
    if (it == out.end()) it = out.insert(out.end(), Configuration{label, &run, {}, {}});
    if (selection.Uses(run)) {
      if (it->ok_runs.empty()) it->first = &run;
      it->ok_runs.push_back(&run);
    } else if (run.ok) {
      it->left_out.push_back(&run);
    }
  }
  return out;
}

// Why a configuration's ok runs are not compared: the first left-out run's reason.
std::string LeftOutReason(const Configuration& c, const char* side) {
  return fmt::format("{} '{}' ({}): {} of its ok run(s) left out, e.g. {}", side, c.label,
                     c.first->load_point, c.left_out.size(),
                     c.left_out.front()->UncertifiedReason());
}

bool Usable(const ComparedRun& run, const std::string& column) {
  return !results::IsEnergyColumn(column) || results::EnergyValid(run.figures);
}

Spread SpreadOf(const std::vector<const ComparedRun*>& runs, const std::string& column) {
  std::vector<double> values;
  for (const auto* run : runs) {
    if (!Usable(*run, column)) continue;
    auto it = run->figures.find(column);
    if (it != run->figures.end() && !std::isnan(it->second)) values.push_back(it->second);
  }
  Spread s;
  s.runs = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  s.median = values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  s.min = values.front();
  s.max = values.back();
  return s;
}

FigureVerdict Verdict(const ComparedFigure& f) {
  using Kind = FigureVerdict::Kind;
  if (f.a.runs == 0 || f.b.runs == 0) return {Kind::kNotMeasured, ""};
  if (f.a.median == f.b.median) return {Kind::kSame, ""};
  const bool b_better = (f.b.median > f.a.median) == f.higher_is_better;
  const Kind direction = b_better ? Kind::kBetter : Kind::kWorse;
  if (f.a.runs < 2 && f.b.runs < 2) return {direction, ", noise unknown (<2 repeats)"};
  if (f.a.runs < 2 || f.b.runs < 2) {
    // One run against repeats (a later sweep against a baseline): the repeats' range is the
    // noise the single run is judged by.
    const bool a_repeated = f.a.runs >= 2;
    const Spread& range = a_repeated ? f.a : f.b;
    const double single = a_repeated ? f.b.median : f.a.median;
    if (single >= range.min && single <= range.max) return {Kind::kWithinNoise, ""};
    return {direction,
            a_repeated ? ", outside A's range (B: 1 run)" : ", outside B's range (A: 1 run)"};
  }
  const bool overlap = !(f.a.max < f.b.min || f.b.max < f.a.min);
  return overlap ? FigureVerdict{Kind::kWithinNoise, ""} : FigureVerdict{direction, ""};
}

// Fields that differ between two field lists (by name, in a's order, then b's extras).
std::vector<FieldChange> Changes(const std::vector<Field>& a, const std::vector<Field>& b) {
  std::vector<FieldChange> out;
  auto find = [](const std::vector<Field>& fields, const std::string& name) -> const Field* {
    for (const auto& f : fields) {
      if (f.name == name) return &f;
    }
    return nullptr;
  };
  for (const auto& f : a) {
    const Field* other = find(b, f.name);
    const std::string value_b = other ? other->value : "(absent)";
    if (value_b != f.value) out.push_back({f.name, f.value, value_b});
  }
  for (const auto& f : b) {
    if (!find(a, f.name)) out.push_back({f.name, "(absent)", f.value});
  }
  return out;
}

std::vector<std::string> Texts(const std::vector<FieldChange>& changes) {
  std::vector<std::string> out;
  for (const auto& c : changes) out.push_back(fmt::format("{}: '{}' vs '{}'", c.name, c.a, c.b));
  return out;
}

std::vector<std::string> Differences(const std::vector<Field>& a, const std::vector<Field>& b) {
  return Texts(Changes(a, b));
}

std::string AxisName(const std::string& difference) {
  return difference.substr(0, difference.find(':'));
}

// The varied axes of some differences: an engine's version, image and flags go with the engine
// when the engine itself differs (one axis: "vLLM 0.33 vs SGLang 0.5.23").
std::set<std::string> VariedAxes(const std::vector<std::string>& differences) {
  std::set<std::string> axes;
  for (const auto& d : differences) axes.insert(AxisName(d));
  if (axes.count("engine")) {
    // An engine's version, image and flags, and the emulator's own settings, are the engine's.
    std::erase_if(axes, [](const std::string& a) {
      return a.rfind("engine.", 0) == 0 || a.rfind("sim.", 0) == 0;
    });
  }
  return axes;
}

// The quality gate of b against a (the baseline).
QualityGate GateOf(const Configuration& a, const Configuration& b) {
  QualityGate gate;
  const std::string& set_a = a.first->quality_task_set;
  const std::string& set_b = b.first->quality_task_set;
  if (set_a.empty() && set_b.empty()) return gate;
  if (set_a != set_b) {
    gate.text = fmt::format("quality gate not applied: task sets differ ('{}' vs '{}')",
                            set_a.empty() ? "none" : set_a, set_b.empty() ? "none" : set_b);
    return gate;
  }
  const Spread sa = SpreadOf(a.ok_runs, "quality_accuracy");
  const Spread sb = SpreadOf(b.ok_runs, "quality_accuracy");
  if (sa.runs == 0 || sb.runs == 0) {
    gate.text = "quality gate not applied: accuracy not measured";
    return gate;
  }
  gate.applied = true;
  gate.accuracy_a = sa.median;
  gate.accuracy_b = sb.median;
  gate.margin = a.first->quality_margin;
  gate.failed = sb.median < sa.median - gate.margin - 1e-9;
  gate.text = fmt::format("quality gate {}: accuracy {:.2f} {} baseline {:.2f} - {:.2f}",
                          gate.failed ? "FAILED" : "passed", sb.median,
                          gate.failed ? "<" : ">=", sa.median, gate.margin);
  return gate;
}

// The matrix keys (system fields) that drive each effective setting: a difference in the
// setting is the compared axis when one of them differs too, else the runs are not matched.
const std::map<std::string, std::vector<std::string>>& EffectiveDrivers() {
  static const std::map<std::string, std::vector<std::string>> drivers = {
      {"prefill_budget_tok", {"engine_config.max_batched_tokens"}},
      {"prefill_chunk_tok",
       {"engine_config.chunked_prefill", "engine_config.chunked_prefill_tokens",
        "engine_config.max_batched_tokens", "layout.dp"}},
      {"max_running_requests", {"engine_config.max_num_seqs", "engine_config.speculative"}},
      {"context_len_tok", {"engine_config.context_len"}},
      {"api_servers", {"engine_config.api_server_count", "layout.dp"}},
      {"kv_cache_dtype", {"kv_cache_dtype"}},
      {"prefix_caching", {"engine_config.prefix_caching"}},
      {"spec_method", {"engine_config.speculative"}},
      {"spec_draft_tokens_per_step", {"engine_config.speculative"}},
  };
  return drivers;
}

// Effective settings of b against a: differences, and those no differing matrix key explains.
void CompareEffective(const ComparedRun& a, const ComparedRun& b,
                      const std::vector<FieldChange>& system_changes, ComparedPair* pair) {
  if (a.effective.empty() || b.effective.empty()) {
    if (!a.effective.empty() || !b.effective.empty()) {
      pair->effective_unknown.push_back(fmt::format(
          "effective settings of {} unknown (no engine check ran before its engine started)",
          a.effective.empty() ? "A" : "B"));
    }
    return;
  }
  for (const auto& change : Changes(a.effective, b.effective)) {
    if (change.a.rfind("n/a", 0) == 0 || change.b.rfind("n/a", 0) == 0 || change.a == "(absent)" ||
        change.b == "(absent)") {
      pair->effective_unknown.push_back(fmt::format("effective.{}: '{}' vs '{}' (not comparable)",
                                                    change.name, change.a, change.b));
      continue;
    }
    pair->effective_changes.push_back({"effective." + change.name, change.a, change.b});
    const std::string setting = change.name.substr(change.name.find(':') + 1);
    std::vector<std::string> explained_by;
    if (auto it = EffectiveDrivers().find(setting); it != EffectiveDrivers().end()) {
      for (const auto& c : system_changes) {
        if (std::find(it->second.begin(), it->second.end(), c.name) != it->second.end()) {
          explained_by.push_back(c.name);
        }
      }
    }
    if (explained_by.empty()) {
      pair->mismatches.push_back(
          fmt::format("effective.{}: '{}' vs '{}' (the engines resolved the same matrix settings "
                      "differently)",
                      change.name, change.a, change.b));
    }
  }
}

// The record's cache_state as a condition: a fresh engine's cache and a verified reset are the
// same start; an unverified reset and no reset are not.
std::string PrefixCacheAtStart(const std::string& cache_state) {
  if (cache_state.empty()) return "";  // a database from before engine_lifecycle
  if (cache_state.rfind("cold", 0) == 0 || cache_state == "reset") return "empty";
  if (cache_state.rfind("reset", 0) == 0) return "reset, unverified";
  return "not reset";
}

bool IsGpuCondition(const FieldChange& c) {
  return c.name == "gpus.model" || c.name == "gpus.count";
}
bool IsLayoutField(const std::string& varied) { return varied.rfind("layout.", 0) == 0; }

// Conditions, varied fields and figures of configuration b against configuration a.
ComparedPair ComparePair(const Configuration& a, const Configuration& b) {
  ComparedPair pair;
  pair.load_point = a.first->load_point;
  pair.label_a = a.label;
  pair.label_b = b.label;
  pair.condition_changes = Changes(a.first->conditions, b.first->conditions);
  pair.varied = Differences(a.first->system, b.first->system);
  // A managed endpoint's hardware is not known: GPU model and count cannot match, and the
  // comparable figure is the cost per request (or per token), said in a note.
  if (a.first->managed_endpoint || b.first->managed_endpoint) {
    for (const auto& change : pair.condition_changes) {
      if (IsGpuCondition(change)) {
        pair.notes.push_back(fmt::format(
            "{} differs ('{}' vs '{}'): {} a managed endpoint, whose hardware is not known; "
            "compare cost per completed request and per million output tokens",
            change.name, change.a, change.b,
            a.first->managed_endpoint && b.first->managed_endpoint ? "both sides are"
            : a.first->managed_endpoint                            ? "A is"
                                                                   : "B is"));
      }
    }
    std::erase_if(pair.condition_changes, IsGpuCondition);
    // Nor is its layout: the one in the matrix only places the run, so it varies with the engine.
    if (std::erase_if(pair.varied, IsLayoutField)) {
      pair.notes.push_back(
          "the layout of a managed endpoint is not known: it varies with the engine, not on its "
          "own");
    }
  }
  // A run that started its engine against one on an engine already warm: the same cache, but
  // not the same JIT, graph and allocator state (docs/matrix.md#engine-lifecycle).
  if (!a.first->engine_start.empty() && !b.first->engine_start.empty() &&
      a.first->engine_start != b.first->engine_start) {
    pair.notes.push_back(fmt::format(
        "A's run ran on a {} engine, B's on a {} one (engine_run_index: the run that starts an "
        "engine is its cold run)",
        a.first->engine_start, b.first->engine_start));
  }
  // A compared layout brings its own GPU count: that difference is the point, not a mismatch.
  if (std::any_of(pair.varied.begin(), pair.varied.end(), IsLayoutField)) {
    std::erase_if(pair.condition_changes,
                  [](const FieldChange& c) { return c.name == "gpus.count"; });
  }
  pair.mismatches = Texts(pair.condition_changes);
  CompareEffective(*a.first, *b.first, Changes(a.first->system, b.first->system), &pair);
  for (const auto& column : kFigures) {
    ComparedFigure f;
    f.column = column.column;
    f.higher_is_better = column.higher_is_better;
    f.a = SpreadOf(a.ok_runs, f.column);
    f.b = SpreadOf(b.ok_runs, f.column);
    f.change_pct = f.a.median != 0 ? (f.b.median - f.a.median) / f.a.median * 100 : NAN;
    f.verdict = Verdict(f);
    pair.figures.push_back(std::move(f));
  }
  pair.quality = GateOf(a, b);
  if (pair.quality.failed) {
    // A speed-up bought with answer quality is not a win.
    for (auto& f : pair.figures) {
      if (f.column != std::string("quality_accuracy") &&
          f.verdict.kind == FigureVerdict::Kind::kBetter) {
        f.verdict = {FigureVerdict::Kind::kNotAWin, ""};
      }
    }
  }
  return pair;
}

// `label` without the space-separated tokens of `group` (a group's shared axis values).
std::string WithoutTokens(const std::string& label, const std::string& group) {
  std::set<std::string> shared;
  std::istringstream group_tokens(group);
  for (std::string t; group_tokens >> t;) shared.insert(t);
  std::string out;
  std::istringstream label_tokens(label);
  for (std::string t; label_tokens >> t;) {
    if (!shared.count(t)) out += (out.empty() ? "" : " ") + t;
  }
  return out.empty() ? label : out;
}

std::string SpreadText(const Spread& s) {
  if (s.runs == 0) return "n/a";
  return fmt::format("{:.4g} [{:.4g}..{:.4g}] ({})", s.median, s.min, s.max, s.runs);
}

}  // namespace

std::string FigureVerdict::Text(bool against_baseline) const {
  const std::string b = against_baseline ? "" : "B ";
  switch (kind) {
    case Kind::kNotMeasured:
      return "not measured";
    case Kind::kSame:
      return "same";
    case Kind::kWithinNoise:
      return "within noise";
    case Kind::kBetter:
      return b + "better" + qualifier;
    case Kind::kWorse:
      return b + "worse" + qualifier;
    case Kind::kNotAWin:
      return "not a win: quality gate FAILED";
  }
  return "";
}

std::string ComparedRun::UncertifiedReason() const {
  if (!ok) return "";
  if (validity == schema::Validity::INVALID) return "invalid: " + validity_reasons;
  if (client_bound) return "client-bound: " + client_bound_reasons;
  return "";
}

bool Comparison::matched() const {
  return std::all_of(pairs.begin(), pairs.end(),
                     [](const ComparedPair& p) { return p.mismatches.empty(); });
}

bool Comparison::any_refused() const {
  return std::any_of(pairs.begin(), pairs.end(),
                     [](const ComparedPair& p) { return !p.refused.empty(); });
}

void DescribeRun(schema::RunSpec::Reader spec, const std::map<std::string, std::string>& record,
                 ComparedRun* out) {
  const auto w = spec.getWorkload();
  const auto slo = spec.getSlo();
  auto& c = out->conditions;
  c = {
      {"checkpoint.model", spec.getModel()},
      {"checkpoint.revision", spec.getCheckpointRevision()},
      {"gpus.model", Get(record, "gpu_model")},
      {"gpus.count", std::to_string(spec.getGpusNeeded())},
      {"workload.api", w.getApi() == schema::ApiKind::COMPLETIONS ? "completions" : "chat"},
      {"workload.prompt", w.getTokenIdPrompts() ? "token ids" : "text"},
      {"workload.input_len", Get(record, "input_len_dist")},
      {"workload.output_len", Get(record, "output_len_dist")},
      {"workload.trace", w.getTrace()},
      {"workload.seed", std::to_string(w.getSeed())},
      {"workload.temperature", Number(w.getTemperature())},
      {"workload.ignore_eos", w.getIgnoreEos() ? "true" : "false"},
      {"load.concurrency", std::to_string(w.getConcurrency())},
      {"load.max_in_flight", std::to_string(w.getMaxInFlight())},
      {"load.request_rate_per_s", Number(w.getRequestRatePerS())},
      {"load.arrival", Get(record, "arrival")},
      {"warmup.requests", std::to_string(w.getWarmupRequests())},
      {"window.requests", std::to_string(w.getNumRequests())},
      {"slo.ttft_ms", Number(slo.getTtftMs())},
      {"slo.tpot_ms", Number(slo.getTpotMs())},
      {"slo.e2el_ms", Number(slo.getE2elMs())},
      // One engine per configuration or per run, and the prefix cache the run started from.
      {"engine.lifecycle", Get(record, "engine_lifecycle")},
      {"engine.prefix_cache", PrefixCacheAtStart(Get(record, "cache_state"))},
  };
  const std::string run_index = Get(record, "engine_run_index");
  out->engine_start = run_index.empty() ? "" : run_index == "0" ? "cold" : "warm";
  const auto layout = spec.getLayout();
  std::string flags;
  for (auto flag : spec.getEngineFlags()) flags += (flags.empty() ? "" : " ") + std::string(flag);
  auto& s = out->system;
  s = {
      {"engine", spec.getEngine()},
      {"engine.version", spec.getEngineVersion()},
      {"engine.image", spec.getImage()},
      {"engine.flags", flags},
      {"precision", spec.getPrecision()},
      {"quantization", spec.getQuantization()},
      {"kv_cache_dtype", spec.getKvCacheDtype()},
      {"layout.tp", std::to_string(layout.getTp())},
      {"layout.pp", std::to_string(layout.getPp())},
      {"layout.dp", std::to_string(layout.getDp())},
      {"layout.ep", layout.getExpertParallel() ? "on" : "off"},
      {"layout.pd",
       layout.getPrefillInstances() > 0
           ? fmt::format("{}P{}D", layout.getPrefillInstances(), layout.getDecodeInstances())
           : "none"},
  };
  // The engine settings the matrix asked for (their effect is `effective`, below).
  const auto config = spec.getEngineConfig();
  const auto toggle = [](schema::EngineConfig::Toggle t) {
    return t == schema::EngineConfig::Toggle::ON    ? std::string("on")
           : t == schema::EngineConfig::Toggle::OFF ? std::string("off")
                                                    : std::string("default");
  };
  const auto count = [](uint32_t v) { return v > 0 ? std::to_string(v) : std::string("default"); };
  s.push_back({"engine_config.max_num_seqs", count(config.getMaxNumSeqs())});
  s.push_back({"engine_config.max_batched_tokens", count(config.getMaxBatchedTokens())});
  s.push_back({"engine_config.context_len", count(config.getContextLenTok())});
  s.push_back({"engine_config.api_server_count", count(config.getApiServerCount())});
  s.push_back({"engine_config.prefix_caching", toggle(config.getPrefixCaching())});
  s.push_back({"engine_config.chunked_prefill", toggle(config.getChunkedPrefill())});
  s.push_back({"engine_config.chunked_prefill_tokens", count(config.getChunkedPrefillTok())});
  s.push_back({"engine_config.speculative",
               config.getSpecMethod().size() == 0 && config.getSpecModel().size() == 0
                   ? std::string("none")
                   : fmt::format("{} {} x{} topk {} tree {}", config.getSpecMethod().cStr(),
                                 config.getSpecModel().cStr(), config.getSpecNumTokens(),
                                 config.getSpecEagleTopk(), config.getSpecNumDraftTokens())});
  // "name=value; decode0:name=value" (results/record_columns.cc).
  out->effective.clear();
  std::istringstream settings(Get(record, "effective_settings"));
  for (std::string item; std::getline(settings, item, ';');) {
    item.erase(0, item.find_first_not_of(' '));
    const size_t eq = item.find('=');
    if (eq != std::string::npos)
      out->effective.push_back({item.substr(0, eq), item.substr(eq + 1)});
  }
  if (spec.getEngine() == "sim") {
    const auto sim = spec.getSim();
    s.push_back({"sim.ttft_ms", Number(sim.getTtftMs())});
    s.push_back({"sim.itl_ms", Number(sim.getItlMs())});
    s.push_back({"sim.answer_accuracy", Number(sim.getAnswerAccuracy())});
  }
  const auto quality = spec.getQuality();
  if (quality.getTaskSet().size() > 0) {
    out->quality_task_set =
        fmt::format("{}: {} tasks, seed {}, max_tokens {}", quality.getTaskSet().cStr(),
                    quality.getTasks().size(), quality.getSeed(), quality.getMaxTokens());
    out->quality_margin = quality.getMarginAccuracy();
  }
  out->baseline = spec.getBaseline();
  out->compare_group = spec.getCompareGroup();
  out->validity_reasons = Get(record, "validity_reasons");
  out->client_bound = Get(record, "client_bound") == "1";
  out->client_bound_reasons = Get(record, "client_bound_reasons");
  out->energy_invalid_reason = Get(record, "energy_invalid_reason");
  out->managed_endpoint = spec.getEngine() == "external";
  out->load_point =
      w.getRequestRatePerS() > 0
          ? fmt::format("rate {}/s{}", w.getRequestRatePerS(),
                        w.getMaxInFlight() > 0 ? fmt::format(" max {}", w.getMaxInFlight()) : "")
          : fmt::format("concurrency {}", w.getConcurrency());
}

Status LoadComparedRuns(const std::string& dir, std::vector<ComparedRun>* out) {
  const std::string db = dir + "/results.db";
  if (!std::filesystem::exists(db)) {
    return Status::NotFound(fmt::format("{}: expected a sweep's results database, found none", db));
  }
  std::unique_ptr<results::ResultsStore> store;
  if (Status s = results::ResultsStore::Open(db, &store); !s.ok()) return s;
  if (Status s = LoadComparedRuns(*store, out); !s.ok()) {
    return s.Prefixed(db);
  }
  return Status::Ok();
}

Status LoadComparedRuns(results::ResultsStore& store, std::vector<ComparedRun>* out) {
  std::vector<results::StoredRun> runs;
  if (Status s = store.LoadRuns(&runs); !s.ok()) return s;
  results::Table summary;
  if (Status s = store.QuerySummary(&summary); !s.ok()) return s;
  std::map<std::string, std::map<std::string, std::string>> records;
  std::map<std::string, std::map<std::string, double>> figures;
  for (size_t r = 0; r < summary.rows.size(); ++r) {
    const std::string run_id = summary.rows[r][0];
    for (size_t c = 0; c < summary.columns.size(); ++c) {
      if (summary.is_null[r][c]) continue;
      const std::string& cell = summary.rows[r][c];
      records[run_id][summary.columns[c]] = cell;
      char* end = nullptr;
      const double value = std::strtod(cell.c_str(), &end);
      if (!cell.empty() && end && *end == '\0') figures[run_id][summary.columns[c]] = value;
    }
  }
  out->clear();
  for (const auto& stored : runs) {
    auto words = kj::heapArray<capnp::word>(stored.spec_bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), stored.spec_bytes.data(), words.size() * sizeof(capnp::word));
    ComparedRun run;
    run.run_id = stored.run_id;
    run.label = stored.label;
    const auto& record = records[stored.run_id];
    run.ok = Get(record, "result_status") == "ok";
    if (Status s = results::ParseValidity(Get(record, "validity"), &run.validity); !s.ok()) {
      return s.Prefixed(fmt::format("results.db, run {}", stored.run_id));
    }
    kj::Maybe<kj::Exception> corrupt = kj::runCatchingExceptions([&]() {
      capnp::FlatArrayMessageReader reader(words);
      DescribeRun(reader.getRoot<schema::RunSpec>(), record, &run);
    });
    if (corrupt != nullptr) {
      return Status::Internal(fmt::format("the stored spec of run {} is unreadable", run.run_id));
    }
    if (run.ok) run.figures = figures[stored.run_id];
    out->push_back(std::move(run));
  }
  return Status::Ok();
}

Status CompareRuns(const std::vector<ComparedRun>& a, const std::vector<ComparedRun>& b,
                   Comparison* out, const RunSelection& selection) {
  // Every ok run pairs (the check below); only the selected ones give figures.
  const auto configs_a = Configurations(a, selection), configs_b = Configurations(b, selection);
  // One configuration per load point and side, else the pairing would be a guess.
  auto check = [](const std::vector<Configuration>& configs, const char* side) -> Status {
    bool any_ok = false;
    for (size_t i = 0; i < configs.size(); ++i) {
      any_ok = any_ok || !configs[i].ok_runs.empty() || !configs[i].left_out.empty();
      for (size_t j = i + 1; j < configs.size(); ++j) {
        if (configs[i].first->load_point == configs[j].first->load_point) {
          return Status::InvalidArgument(fmt::format(
              "sweep {} has two configurations at load point '{}' ('{}' and '{}'); expected one "
              "per load point: compare sweeps that each hold one system under test",
              side, configs[i].first->load_point, configs[i].label, configs[j].label));
        }
      }
    }
    if (!any_ok)
      return Status::FailedPrecondition(fmt::format("sweep {} has no run with an ok result", side));
    return Status::Ok();
  };
  if (Status s = check(configs_a, "A"); !s.ok()) return s;
  if (Status s = check(configs_b, "B"); !s.ok()) return s;

  *out = Comparison{};
  std::set<std::string> paired_b;
  for (const auto& ca : configs_a) {
    auto cb = std::find_if(configs_b.begin(), configs_b.end(), [&](const Configuration& c) {
      return c.first->load_point == ca.first->load_point;
    });
    if (cb == configs_b.end()) {
      out->unpaired.push_back(fmt::format("A '{}' ({}): no run of B at this load point", ca.label,
                                          ca.first->load_point));
      continue;
    }
    paired_b.insert(cb->label);
    if (ca.ok_runs.empty() || cb->ok_runs.empty()) {
      // No figure of a rejected or client-bound run enters a comparison unless asked.
      ComparedPair refused;
      refused.load_point = ca.first->load_point;
      refused.label_a = ca.label;
      refused.label_b = cb->label;
      refused.refused = ca.ok_runs.empty() ? LeftOutReason(ca, "A") : LeftOutReason(*cb, "B");
      out->pairs.push_back(std::move(refused));
      continue;
    }
    out->pairs.push_back(ComparePair(ca, *cb));
  }
  for (const auto& cb : configs_b) {
    if (!paired_b.count(cb.label)) {
      out->unpaired.push_back(fmt::format("B '{}' ({}): no run of A at this load point", cb.label,
                                          cb.first->load_point));
    }
  }
  if (out->pairs.empty()) {
    return Status::FailedPrecondition(
        "the two sweeps share no load point (concurrency or request rate)");
  }
  return Status::Ok();
}

std::string RenderGroupComparisons(const std::vector<ComparedRun>& runs,
                                   const RunSelection& selection) {
  // Groups in first-seen order; each group's configurations in first-seen order.
  std::vector<std::pair<std::string, std::vector<ComparedRun>>> groups;
  for (const auto& run : runs) {
    if (run.compare_group.empty()) continue;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == run.compare_group; });
    if (it == groups.end()) it = groups.insert(groups.end(), {run.compare_group, {}});
    it->second.push_back(run);
  }
  if (groups.empty()) return "";
  std::string out =
      "\n## Comparison groups\n\nRuns that differ only in the compared axes (`compare:` in the "
      "matrix), each against the group's baseline. Medians [min..max] (ok repeats); a change is "
      "within noise when the ranges overlap (docs/compare.md).\n";
  for (const auto& [name, members] : groups) {
    const bool quality = std::any_of(members.begin(), members.end(), [](const ComparedRun& r) {
      return !r.quality_task_set.empty();
    });
    const bool managed = std::any_of(members.begin(), members.end(),
                                     [](const ComparedRun& r) { return r.managed_endpoint; });
    const bool priced = std::any_of(members.begin(), members.end(), [](const ComparedRun& r) {
      auto it = r.figures.find("cost_per_completed_request");
      return it != r.figures.end() && !std::isnan(it->second);
    });
    // Against a managed endpoint GPU figures mean nothing: latency, reliability and cost do.
    std::vector<const char*> shown =
        managed ? std::vector<const char*>{"success_rate",   "ttft_median_ms", "ttft_p99_ms",
                                           "tpot_median_ms", "e2el_median_ms", "e2el_p99_ms"}
                : std::vector<const char*>{"request_throughput", "output_throughput",
                                           "ttft_median_ms", "tpot_median_ms"};
    if (quality) shown.push_back("quality_accuracy");
    if (priced || managed) {
      shown.push_back("cost_per_completed_request");
      shown.push_back("cost_per_mtok_output");
    }
    const auto configs = Configurations(members, selection);
    size_t base = 0;
    for (size_t i = 0; i < configs.size(); ++i) {
      if (configs[i].first->baseline) {
        base = i;
        break;
      }
    }
    std::vector<ComparedPair> pairs;
    std::set<std::string> varied, mismatched;
    for (const auto& config : configs) {
      pairs.push_back(ComparePair(configs[base], config));
      for (const auto& v : VariedAxes(pairs.back().varied)) varied.insert(v);
      for (const auto& m : pairs.back().mismatches) mismatched.insert(m);
    }
    out += fmt::format("\n### {}\n\n", name);
    if (mismatched.empty()) {
      out += "Matched: every condition is the same.";
    } else {
      out += "**Not matched**; differences are not attributable to the compared axes:";
      for (const auto& m : mismatched) out += fmt::format(" {};", m);
    }
    std::string axes;
    for (const auto& v : varied) axes += (axes.empty() ? "" : ", ") + v;
    out += fmt::format(" Varied: {}.", axes.empty() ? "nothing" : axes);
    if (varied.size() > 1) {
      out += fmt::format(
          " **Warning**: {} axes vary at once; a difference cannot be attributed "
          "to one of them.",
          varied.size());
    }
    out += "\n\n| configuration |";
    for (const char* column : shown) out += fmt::format(" {} |", column);
    out += "\n|---|";
    for (size_t i = 0; i < shown.size(); ++i) out += "---|";
    out += "\n";
    for (size_t i = 0; i < configs.size(); ++i) {
      out += fmt::format("| {}{}{} |", WithoutTokens(configs[i].label, name),
                         i == base ? " (baseline)" : "",
                         pairs[i].quality.failed ? " **quality gate FAILED**" : "");
      for (const char* column : shown) {
        const auto f = std::find_if(pairs[i].figures.begin(), pairs[i].figures.end(),
                                    [&](const ComparedFigure& x) { return x.column == column; });
        out += " " + SpreadText(f->b);
        if (i != base && !std::isnan(f->change_pct)) {
          // Against the baseline: "B worse" reads "worse".
          out += fmt::format(" ({:+.1f}%, {})", f->change_pct, f->verdict.Text(true));
        }
        out += " |";
      }
      out += "\n";
    }
    std::set<std::string> notes;
    for (const auto& pair : pairs) notes.insert(pair.notes.begin(), pair.notes.end());
    if (!notes.empty()) out += "\n";
    for (const auto& note : notes) out += fmt::format("Note: {}.\n", note);
    std::string gates;
    for (size_t i = 0; i < configs.size(); ++i) {
      if (i == base || pairs[i].quality.text.empty()) continue;
      gates += fmt::format(
          "- {}: {}\n", WithoutTokens(configs[i].label, name),
          pairs[i].quality.failed
              ? fmt::format("**{}** (its speed changes are not wins)", pairs[i].quality.text)
              : pairs[i].quality.text);
    }
    if (!gates.empty()) {
      out += fmt::format(
          "\nQuality gate (accuracy may fall at most the margin below the "
          "baseline's; docs/quality.md):\n\n{}",
          gates);
    }
  }
  return out;
}

std::string RenderComparisonText(const Comparison& comparison, const std::string& name_a,
                                 const std::string& name_b) {
  std::string out = fmt::format("A: {}\nB: {}\n", name_a, name_b);
  std::set<std::string> varied_axes;
  for (const auto& pair : comparison.pairs) {
    for (const auto& v : VariedAxes(pair.varied)) varied_axes.insert(v);
  }
  if (comparison.matched()) {
    out +=
        "matched: every condition (checkpoint, GPUs, workload, load, warm-up, window, SLO) "
        "is the same in each pair\n";
  } else {
    out +=
        "NOT matched: the pairs below differ in conditions; their differences are not "
        "attributable to the system under test\n";
  }
  if (varied_axes.empty()) {
    out += "varied: nothing (the same system on both sides: a repeatability check)\n";
  } else {
    std::string names;
    for (const auto& axis : varied_axes) names += (names.empty() ? "" : ", ") + axis;
    out += fmt::format("varied: {}\n", names);
    if (varied_axes.size() > 1) {
      out += fmt::format(
          "warning: {} axes vary at once; a difference cannot be attributed to one of them\n",
          varied_axes.size());
    }
  }
  for (const auto& u : comparison.unpaired) out += fmt::format("unpaired: {}\n", u);
  for (const auto& pair : comparison.pairs) {
    out += fmt::format("\n== {}: A '{}' vs B '{}'\n", pair.load_point, pair.label_a, pair.label_b);
    if (!pair.refused.empty()) {
      out += fmt::format("  NOT COMPARED: {} (--include-invalid compares them anyway)\n",
                         pair.refused);
      continue;
    }
    for (const auto& m : pair.mismatches) out += fmt::format("  condition differs: {}\n", m);
    for (const auto& n : pair.notes) out += fmt::format("  note: {}\n", n);
    for (const auto& v : pair.varied) out += fmt::format("  varied: {}\n", v);
    for (const auto& e : pair.effective_changes) {
      out += fmt::format("  effective setting differs: {}: '{}' vs '{}'\n", e.name, e.a, e.b);
    }
    for (const auto& u : pair.effective_unknown) out += fmt::format("  {}\n", u);
    if (!pair.quality.text.empty()) {
      out += fmt::format("  {}{}\n", pair.quality.text,
                         pair.quality.failed ? " (B's speed-ups are not wins)" : "");
    }
    out += fmt::format("  {:<26} {:>28} {:>28} {:>8}  {}\n", "figure", "A median [min..max] (n)",
                       "B median [min..max] (n)", "change", "verdict");
    for (const auto& f : pair.figures) {
      out += fmt::format("  {:<26} {:>28} {:>28} {:>8}  {}\n", f.column, SpreadText(f.a),
                         SpreadText(f.b),
                         std::isnan(f.change_pct) ? "n/a" : fmt::format("{:+.1f}%", f.change_pct),
                         f.verdict.Text());
    }
  }
  return out;
}

std::string RenderComparisonJson(const Comparison& comparison, const std::string& name_a,
                                 const std::string& name_b) {
  nlohmann::json j;
  j["a"] = name_a;
  j["b"] = name_b;
  j["matched"] = comparison.matched();
  j["unpaired"] = comparison.unpaired;
  j["pairs"] = nlohmann::json::array();
  auto spread = [](const Spread& s) {
    return nlohmann::json{{"runs", s.runs}, {"median", s.median}, {"min", s.min}, {"max", s.max}};
  };
  for (const auto& pair : comparison.pairs) {
    nlohmann::json p{{"load_point", pair.load_point}, {"label_a", pair.label_a},
                     {"label_b", pair.label_b},       {"mismatches", pair.mismatches},
                     {"varied", pair.varied},         {"figures", nlohmann::json::array()},
                     {"refused", pair.refused},       {"notes", pair.notes}};
    p["effective_changes"] = nlohmann::json::array();
    for (const auto& e : pair.effective_changes) {
      p["effective_changes"].push_back({{"name", e.name}, {"a", e.a}, {"b", e.b}});
    }
    p["effective_unknown"] = pair.effective_unknown;
    p["quality_gate"] = {
        {"applied", pair.quality.applied},       {"failed", pair.quality.failed},
        {"accuracy_a", pair.quality.accuracy_a}, {"accuracy_b", pair.quality.accuracy_b},
        {"margin", pair.quality.margin},         {"text", pair.quality.text}};
    for (const auto& f : pair.figures) {
      p["figures"].push_back(
          {{"column", f.column},
           {"higher_is_better", f.higher_is_better},
           {"a", spread(f.a)},
           {"b", spread(f.b)},
           {"change_pct",
            std::isnan(f.change_pct) ? nlohmann::json(nullptr) : nlohmann::json(f.change_pct)},
           {"verdict", f.verdict.Text()}});
    }
    j["pairs"].push_back(std::move(p));
  }
  return j.dump(2);
}

}  // namespace servesweep::report
