#include "matrix/run_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "common/engine_names.h"
#include "perfmodel/profiles.h"
#include "workload/custom_prompts.h"

namespace servesweep::matrix {
namespace {

bool Present(const YAML::Node& node) { return node.IsDefined() && !node.IsNull(); }

void ReadLayout(YamlReader& r, const YAML::Node& node, schema::Layout::Builder layout) {
  YamlMap m(r, node, "layout");
  if (auto v = m.Get("tp")) layout.setTp(r.Uint(v, "tp", 1));
  if (auto v = m.Get("pp")) layout.setPp(r.Uint(v, "pp", 1));
  if (auto v = m.Get("dp")) layout.setDp(r.Uint(v, "dp", 1));
  if (auto v = m.Get("ep")) layout.setExpertParallel(r.Bool(v, "ep"));
  if (auto v = m.Get("dp_attention")) layout.setDpAttention(r.Bool(v, "dp_attention"));
  if (auto v = m.Get("prefill_instances"))
    layout.setPrefillInstances(r.Uint(v, "prefill_instances", 0));
  if (auto v = m.Get("decode_instances"))
    layout.setDecodeInstances(r.Uint(v, "decode_instances", 0));
  if (auto v = m.Get("gpus_per_node")) layout.setGpusPerNode(r.Uint(v, "gpus_per_node", 1));
  m.Finish();
}

// `{distribution: uniform, low: 64, high: 512, min: 1, max: 4096}` (or normal: mean/std,
// lognormal: median/sigma, empirical: trace) into a length distribution.
void ReadLengthDistribution(YamlReader& r, const std::string& key, const YAML::Node& node,
                            const std::string& matrix_path, schema::LengthDistribution::Builder d) {
  YamlMap m(r, node, "'" + key + "'");
  const YAML::Node kind_node = m.Get("distribution");
  if (auto v = m.Get("min")) d.setMin(r.Uint(v, "min", 1));
  if (auto v = m.Get("max")) d.setMax(r.Uint(v, "max", 1));
  const std::string kind = Present(kind_node) ? r.Text(kind_node, "distribution") : "";
  // Each kind's two parameters; reading them registers them, so a parameter of another kind is
  // an unknown key of this one's mapping only when no kind reads it.
  const std::vector<std::pair<std::string, std::vector<std::string>>> kinds = {
      {"uniform", {"low", "high"}},
      {"normal", {"mean", "std"}},
      {"lognormal", {"median", "sigma"}}};
  std::vector<YAML::Node> params;
  for (const auto& [name, names] : kinds) {
    for (const auto& param : names) {
      const YAML::Node value = m.Get(param);
      if (name == kind) params.push_back(value);
    }
  }
  const YAML::Node trace = m.Get("trace");
  const YAML::Node trace_format = m.Get("trace_format");
  m.Finish();
  if (r.failed()) return;
  if (kind == "empirical") {
    if (!Present(trace)) {
      return r.Fail(node, fmt::format("expected '{}.trace' (the trace whose lengths to draw from) "
                                      "for an empirical distribution, found none",
                                      key));
    }
    d.setKind("empirical");
    d.setTrace(ResolveMatrixPath(matrix_path, r.Text(trace, "trace")));
    if (Present(trace_format)) d.setTraceFormat(r.Text(trace_format, "trace_format"));
    return;
  }
  if (kind.empty()) {
    return r.Fail(node, fmt::format("expected '{}.distribution' (uniform, normal, lognormal or "
                                    "empirical), found none",
                                    key));
  }
  const auto it = std::find_if(kinds.begin(), kinds.end(),
                               [&](const auto& entry) { return entry.first == kind; });
  if (it == kinds.end()) {
    return r.Fail(kind_node, fmt::format("expected '{}.distribution' to be uniform, normal, "
                                         "lognormal or empirical, found '{}'",
                                         key, kind));
  }
  for (size_t i = 0; i < 2; ++i) {
    if (!Present(params[i])) {
      return r.Fail(node, fmt::format("expected '{}.{}' for a {} distribution, found none", key,
                                      it->second[i], kind));
    }
  }
  d.setKind(kind);
  d.setA(r.Number(params[0], it->second[0]));
  d.setB(r.Number(params[1], it->second[1]));
  if (kind == "uniform" && d.getB() < d.getA()) {
    r.Fail(node, fmt::format("expected '{}.high' >= low, found {} < {}", key, d.getB(), d.getA()));
  }
}

void ReadRamp(YamlReader& r, const YAML::Node& node, schema::Workload::Builder w) {
  YamlMap m(r, node, "ramp");
  const YAML::Node kind = m.Get("kind");
  const YAML::Node start = m.Get("start_rate");
  const YAML::Node end = m.Get("end_rate");
  m.Finish();
  if (r.failed()) return;
  for (const auto& [name, value] : {std::pair<const char*, YAML::Node>{"kind", kind},
                                    {"start_rate", start},
                                    {"end_rate", end}}) {
    if (!Present(value)) {
      return r.Fail(node, fmt::format("expected 'ramp.{}' ({{kind: linear|exponential, "
                                      "start_rate: R0, end_rate: R1}}), found none",
                                      name));
    }
  }
  const std::string k = r.Text(kind, "kind");
  if (k != "linear" && k != "exponential") {
    r.Fail(kind, fmt::format("expected 'ramp.kind' to be linear or exponential, found '{}'", k));
  }
  w.setRamp(k);
  const double r0 = r.Number(start, "start_rate");
  const double r1 = r.Number(end, "end_rate");
  if (!(r0 > 0)) r.Fail(start, fmt::format("expected 'ramp.start_rate' > 0, found {}", r0));
  if (!(r1 > 0)) r.Fail(end, fmt::format("expected 'ramp.end_rate' > 0, found {}", r1));
  w.setRampStartRatePerS(r0);
  w.setRampEndRatePerS(r1);
}

void ReadSessions(YamlReader& r, const YAML::Node& node, schema::Workload::Builder w) {
  YamlMap m(r, node, "sessions");
  const YAML::Node count = m.Get("count");
  const YAML::Node turns = m.Get("turns");
  const YAML::Node think_s = m.Get("think_time_s");
  const YAML::Node think = m.Get("think_time");
  m.Finish();
  if (r.failed()) return;
  if (!Present(count) || !Present(turns)) {
    return r.Fail(node, "expected 'sessions: {count: N, turns: T}', found a key missing");
  }
  w.setSessions(r.Uint(count, "count", 1));
  w.setTurns(r.Uint(turns, "turns", 1));
  if (Present(think_s)) w.setThinkTimeS(r.Number(think_s, "think_time_s"));
  if (Present(think)) {
    const std::string shape = r.Text(think, "think_time");
    if (shape != "fixed" && shape != "exponential") {
      r.Fail(think,
             fmt::format("expected 'sessions.think_time' to be fixed or exponential, found '{}'",
                         shape));
    }
    w.setThinkTimeExponential(shape == "exponential");
  }
}

void ReadSharedPrefix(YamlReader& r, const YAML::Node& node, schema::Workload::Builder w) {
  YamlMap m(r, node, "shared_prefix");
  const YAML::Node groups = m.Get("groups");
  const YAML::Node prefix_len = m.Get("prefix_len");
  m.Finish();
  if (r.failed()) return;
  if (!Present(groups) || !Present(prefix_len)) {
    return r.Fail(node,
                  "expected 'shared_prefix: {groups: G, prefix_len: TOKENS}', found a key missing");
  }
  w.setSharedPrefixGroups(r.Uint(groups, "groups", 1));
  w.setSharedPrefixLenTok(r.Uint(prefix_len, "prefix_len", 1));
}

// `early_stop: {stable: true | {...}, oversaturated: true | {...}, max_duration_s: S}`
// (workload/load_settings.h EarlyStopSettings; the schema holds its defaults).
void ReadEarlyStop(YamlReader& r, const YAML::Node& node, schema::Workload::Builder w) {
  YamlMap m(r, node, "early_stop");
  const YAML::Node stable = m.Get("stable");
  const YAML::Node oversaturated = m.Get("oversaturated");
  const YAML::Node max_duration = m.Get("max_duration_s");
  m.Finish();
  if (r.failed()) return;
  auto stop = w.initEarlyStop();
  if (Present(stable)) {
    if (stable.IsMap()) {
      YamlMap rule(r, stable, "early_stop.stable");
      double tolerance_pct = stop.getTolerancePct();
      rule.ReadNumber("tolerance_pct", &tolerance_pct);
      stop.setTolerancePct(tolerance_pct);
      if (auto v = rule.Get("windows")) stop.setWindows(r.Uint(v, "windows", 2));
      if (auto v = rule.Get("window_requests")) {
        stop.setWindowRequests(r.Uint(v, "window_requests", 4));
      }
      if (auto v = rule.Get("min_requests")) stop.setMinRequests(r.Uint(v, "min_requests", 1));
      rule.Finish();
      stop.setStable(true);
    } else {
      stop.setStable(r.Bool(stable, "stable"));
    }
  }
  if (Present(oversaturated)) {
    if (oversaturated.IsMap()) {
      YamlMap rule(r, oversaturated, "early_stop.oversaturated");
      double min_s = stop.getMinS(), window_s = stop.getWindowS(), growth = stop.getMinGrowth();
      rule.ReadNumber("min_s", &min_s);
      rule.ReadNumber("window_s", &window_s);
      rule.ReadNumber("min_growth", &growth);
      rule.Finish();
      stop.setMinS(min_s);
      stop.setWindowS(window_s);
      stop.setMinGrowth(growth);
      stop.setOversaturated(true);
    } else {
      stop.setOversaturated(r.Bool(oversaturated, "oversaturated"));
    }
  }
  if (Present(max_duration)) stop.setMaxDurationS(r.Number(max_duration, "max_duration_s"));
}

// One workload key: its name and how its value is read. The key and the code reading it are one
// entry, so there is no separate list of keys to keep in step.
struct WorkloadKey {
  const char* name;
  std::function<void(YamlReader&, const YAML::Node&, const std::string& matrix_path,
                     schema::Workload::Builder)>
      read;
};

const std::vector<WorkloadKey>& WorkloadKeys() {
  using W = schema::Workload::Builder;
  using N = const YAML::Node&;
  using P = const std::string&;
  static const std::vector<WorkloadKey> keys = {
      {"name", [](YamlReader& r, N v, P, W w) { w.setName(r.Text(v, "name")); }},
      {"api",
       [](YamlReader& r, N v, P, W w) {
         const std::string api = r.Choice(v, "api", {"completions", "chat"});
         w.setApi(api == "chat" ? schema::ApiKind::CHAT_COMPLETIONS : schema::ApiKind::COMPLETIONS);
       }},
      {"input_len",
       [](YamlReader& r, N v, P path, W w) {
         if (v.IsMap())
           return ReadLengthDistribution(r, "input_len", v, path, w.getInputLenDistribution());
         w.setInputLenTok(r.Uint(v, "input_len", 1));
         w.initInputLenDistribution();  // a fixed length replaces a distribution set at a lower level
       }},
      {"output_len",
       [](YamlReader& r, N v, P path, W w) {
         if (v.IsMap())
           return ReadLengthDistribution(r, "output_len", v, path, w.getOutputLenDistribution());
         w.setOutputLenTok(r.Uint(v, "output_len", 1));
         w.initOutputLenDistribution();  // a fixed length replaces a distribution set at a lower level
       }},
      {"num_requests",
       [](YamlReader& r, N v, P, W w) { w.setNumRequests(r.Uint(v, "num_requests", 1)); }},
      {"warmup_requests",
       [](YamlReader& r, N v, P, W w) { w.setWarmupRequests(r.Uint(v, "warmup_requests", 0)); }},
      {"concurrency",
       [](YamlReader& r, N v, P, W w) { w.setConcurrency(r.Uint(v, "concurrency", 1)); }},
      {"max_in_flight",
       [](YamlReader& r, N v, P, W w) { w.setMaxInFlight(r.Uint(v, "max_in_flight", 1)); }},
      {"warmup_concurrency",
       [](YamlReader& r, N v, P, W w) {
         w.setWarmupConcurrency(r.Uint(v, "warmup_concurrency", 1));
       }},
      {"request_rate",
       [](YamlReader& r, N v, P, W w) { w.setRequestRatePerS(r.Number(v, "request_rate")); }},
      {"seed", [](YamlReader& r, N v, P, W w) { w.setSeed(r.Uint(v, "seed", 0)); }},
      {"ignore_eos", [](YamlReader& r, N v, P, W w) { w.setIgnoreEos(r.Bool(v, "ignore_eos")); }},
      {"temperature",
       [](YamlReader& r, N v, P, W w) { w.setTemperature(r.Number(v, "temperature")); }},
      // Expanded into the plan later (workload_expansion.h), against the matrix's folder.
      {"trace", [](YamlReader& r, N v, P path,
                   W w) { w.setTrace(ResolveMatrixPath(path, r.Text(v, "trace"))); }},
      {"trace_format",
       [](YamlReader& r, N v, P, W w) { w.setTraceFormat(r.Text(v, "trace_format")); }},
      {"trace_speedup",
       [](YamlReader& r, N v, P, W w) {
         const double speedup = r.Number(v, "trace_speedup");
         if (speedup <= 0) {
           r.Fail(v, fmt::format("expected 'trace_speedup' > 0, found {}", speedup));
         }
         w.setTraceSpeedup(speedup);
       }},
      {"replay_arrivals",
       [](YamlReader& r, N v, P, W w) { w.setReplayArrivals(r.Bool(v, "replay_arrivals")); }},
      {"burstiness",
       [](YamlReader& r, N v, P, W w) {
         const double burstiness = r.Number(v, "burstiness");
         if (burstiness <= 0) {
           r.Fail(v, fmt::format("expected 'burstiness' > 0 (1 = Poisson), found {}", burstiness));
         }
         w.setBurstiness(burstiness);
       }},
      {"prompt",
       [](YamlReader& r, N v, P, W w) {
         w.setTokenIdPrompts(r.Choice(v, "prompt", {"text", "token_ids"}) == "token_ids");
       }},
      {"shared_prefix", [](YamlReader& r, N v, P, W w) { ReadSharedPrefix(r, v, w); }},
      // Its upper bound is checked where it is expanded (workload/prefix_hit_rate.h).
      {"prefix_hit_rate",
       [](YamlReader& r, N v, P, W w) { w.setPrefixHitRate(r.Number(v, "prefix_hit_rate")); }},
      {"arrival",
       [](YamlReader& r, N v, P, W w) {
         const std::string arrival = r.Text(v, "arrival");
         if (arrival != "poisson" && arrival != "constant") {
           r.Fail(v, fmt::format("expected 'arrival' to be poisson or constant (gamma: poisson "
                                 "with 'burstiness'), found '{}'",
                                 arrival));
         }
         w.setArrival(arrival);
       }},
      {"ramp", [](YamlReader& r, N v, P, W w) { ReadRamp(r, v, w); }},
      {"warmup_s", [](YamlReader& r, N v, P, W w) { w.setWarmupS(r.Number(v, "warmup_s")); }},
      {"duration_s",
       [](YamlReader& r, N v, P, W w) {
         const double duration_s = r.Number(v, "duration_s");
         if (!(duration_s > 0)) {
           r.Fail(v, fmt::format("expected 'duration_s' > 0 seconds, found {}", duration_s));
         }
         w.setDurationS(duration_s);
       }},
      {"drain_timeout_s",
       [](YamlReader& r, N v, P, W w) { w.setDrainTimeoutS(r.Number(v, "drain_timeout_s")); }},
      {"sessions", [](YamlReader& r, N v, P, W w) { ReadSessions(r, v, w); }},
      {"early_stop", [](YamlReader& r, N v, P, W w) { ReadEarlyStop(r, v, w); }},
      // `jsonl:<file>`, read by the expansion (workload_expansion.h).
      {"prompts",
       [](YamlReader& r, N v, P path, W w) {
         const std::string text = r.Text(v, "prompts");
         std::string file;
         w.setPrompts(workload::ParsePromptsSpec(text, &file)
                          ? "jsonl:" + ResolveMatrixPath(path, file)
                          : text);
       }},
      // `lora: {choice: uniform | zipf | trace, skew: S}` (workload/lora_choice.h); checked
      // against engine_config.lora's adapters where the run is expanded.
      {"lora",
       [](YamlReader& r, N v, P, W w) {
         YamlMap m(r, v, "workload.lora");
         const YAML::Node choice = m.Get("choice"), skew = m.Get("skew");
         m.Finish();
         if (r.failed()) return;
         if (!Present(choice)) {
           return r.Fail(v, "expected 'choice' (uniform, zipf or trace) in 'lora', found none");
         }
         const std::string name = r.Choice(choice, "choice", {"uniform", "zipf", "trace"});
         w.setLoraChoice(name);
         if (Present(skew)) {
           if (name != "zipf") {
             return r.Fail(skew, fmt::format("expected 'skew' only with choice: zipf, found "
                                             "choice: {}",
                                             name));
           }
           const double s = r.Number(skew, "skew");
           if (r.ok() && !(s > 0)) {
             r.Fail(skew,
                    fmt::format("expected 'skew' > 0 (Zipf: weight 1 / k^skew), found {}", s));
           }
           w.setLoraZipfSkew(s);
         }
       }},
      {"client_threads",
       [](YamlReader& r, N v, P, W w) { w.setClientThreads(r.Uint(v, "client_threads", 1, 64)); }},
  };
  return keys;
}

void ReadWorkloadKey(YamlReader& r, const std::string& key, const YAML::Node& value,
                     const std::string& matrix_path, schema::Workload::Builder w) {
  for (const auto& entry : WorkloadKeys()) {
    if (key == entry.name) return entry.read(r, value, matrix_path, w);
  }
}

void ReadWorkload(YamlReader& r, const YAML::Node& node, const std::string& matrix_path,
                  schema::Workload::Builder w) {
  YamlMap m(r, node, "workload");
  for (const auto& entry : WorkloadKeys()) {
    if (auto v = m.Get(entry.name)) entry.read(r, v, matrix_path, w);
  }
  m.Finish();
}

// A profile's name as the spec keeps it: a shipped name, or a path read against the matrix's
// folder. The profile is loaded here, so a typo fails before any run starts.
template <typename Profile>
std::string ProfileName(YamlReader& r, const YAML::Node& value, const std::string& key,
                        const std::string& matrix_path,
                        Status (*load)(const std::string&, Profile*)) {
  std::string name = r.Text(value, key);
  if (perfmodel::IsProfilePath(name)) name = ResolveMatrixPath(matrix_path, name);
  Profile profile;
  if (Status s = load(name, &profile); r.ok() && !s.ok()) r.Fail(value, s.message());
  return name;
}

void ReadSim(YamlReader& r, const YAML::Node& node, const std::string& matrix_path,
             schema::SimSettings::Builder sim) {
  YamlMap m(r, node, "sim");
  if (auto v = m.Get("ttft_ms")) sim.setTtftMs(r.Number(v, "ttft_ms"));
  if (auto v = m.Get("itl_ms")) sim.setItlMs(r.Number(v, "itl_ms"));
  if (auto v = m.Get("startup_ms")) sim.setStartupMs(r.Number(v, "startup_ms"));
  if (auto v = m.Get("spec_accepted_tok")) sim.setSpecAcceptedTok(r.Number(v, "spec_accepted_tok"));
  if (auto v = m.Get("lora_load_ms")) sim.setLoraLoadMs(r.Number(v, "lora_load_ms"));
  if (auto v = m.Get("answer_accuracy")) {
    const double accuracy = r.Number(v, "answer_accuracy");
    if (accuracy > 1) {
      r.Fail(v, fmt::format("expected 'answer_accuracy' to be a probability in [0, 1], found {}",
                            accuracy));
    }
    sim.setAnswerAccuracy(accuracy);
  }
  if (auto v = m.Get("hardware")) {
    sim.setHardware(ProfileName<perfmodel::HardwareProfile>(r, v, "hardware", matrix_path,
                                                            &perfmodel::LoadHardwareProfile));
  }
  if (auto v = m.Get("model_profile")) {
    sim.setModelProfile(ProfileName<perfmodel::ModelProfile>(r, v, "model_profile", matrix_path,
                                                             &perfmodel::LoadModelProfile));
  }
  m.Finish();
}

// `quality: {task_set: arithmetic | FILE.jsonl, count, seed, margin, max_tokens, numeric}`; the
// tasks themselves are expanded per run (workload_expansion.h).
void ReadQuality(YamlReader& r, const YAML::Node& node, const std::string& matrix_path,
                 schema::QualitySettings::Builder q) {
  YamlMap m(r, node, "quality");
  bool numeric_set = false;
  if (auto v = m.Get("task_set")) {
    const std::string source = r.Text(v, "task_set");
    q.setTaskSet(source == "arithmetic" ? source : ResolveMatrixPath(matrix_path, source));
  }
  if (auto v = m.Get("count")) q.setCount(r.Uint(v, "count", 1));
  if (auto v = m.Get("seed")) q.setSeed(r.Uint(v, "seed", 0));
  if (auto v = m.Get("margin")) {
    const double margin = r.Number(v, "margin");
    if (margin > 1) {
      r.Fail(v, fmt::format("expected 'margin' to be an accuracy difference in [0, 1], found {}",
                            margin));
    }
    q.setMarginAccuracy(margin);
  }
  if (auto v = m.Get("max_tokens")) q.setMaxTokens(r.Uint(v, "max_tokens", 1));
  if (auto v = m.Get("numeric")) {
    q.setNumericAnswers(r.Bool(v, "numeric"));
    numeric_set = true;
  }
  m.Finish();
  if (r.failed()) return;
  if (q.getTaskSet().size() == 0) {
    return r.Fail(node,
                  "expected 'task_set' in 'quality' (arithmetic, or a .jsonl file), found none");
  }
  if (q.getTaskSet() == "arithmetic") {
    if (q.getCount() == 0) q.setCount(50);
    if (!numeric_set) q.setNumericAnswers(true);
  }
}

void ReadSlo(YamlReader& r, const YAML::Node& node, schema::Slo::Builder slo) {
  YamlMap m(r, node, "slo");
  if (auto v = m.Get("ttft_ms")) slo.setTtftMs(r.Number(v, "ttft_ms"));
  if (auto v = m.Get("tpot_ms")) slo.setTpotMs(r.Number(v, "tpot_ms"));
  if (auto v = m.Get("e2el_ms")) slo.setE2elMs(r.Number(v, "e2el_ms"));
  m.Finish();
}

schema::EngineConfig::Toggle ToggleOf(YamlReader& r, const YAML::Node& value,
                                      const std::string& key) {
  if (value.IsScalar() && value.Scalar() == "default") return schema::EngineConfig::Toggle::DEFAULT;
  return r.Bool(value, key) ? schema::EngineConfig::Toggle::ON : schema::EngineConfig::Toggle::OFF;
}

void ReadSpeculative(YamlReader& r, const YAML::Node& node, schema::EngineConfig::Builder c) {
  YamlMap m(r, node, "speculative");
  if (auto v = m.Get("method")) c.setSpecMethod(r.Text(v, "method"));
  if (auto v = m.Get("model")) c.setSpecModel(r.Text(v, "model"));
  if (auto v = m.Get("num_tokens")) c.setSpecNumTokens(r.Uint(v, "num_tokens", 1));
  if (auto v = m.Get("eagle_topk")) c.setSpecEagleTopk(r.Uint(v, "eagle_topk", 1));
  if (auto v = m.Get("num_draft_tokens")) {
    c.setSpecNumDraftTokens(r.Uint(v, "num_draft_tokens", 2));
  }
  m.Finish();
}

// Prices are numbers >= 0; GPU time or tokens, not both (one bill, not two).
void ReadPrice(YamlReader& r, const YAML::Node& node, schema::EngineConfig::Builder c) {
  YamlMap m(r, node, "price");
  const YAML::Node gpu_hour = m.Get("gpu_hour");
  if (gpu_hour) c.setPriceGpuHour(r.Number(gpu_hour, "gpu_hour"));
  struct TokenPrice {
    const char* key;
    void (schema::EngineConfig::Builder::*set)(double);
  };
  for (const TokenPrice& price :
       {TokenPrice{"input_per_mtok", &schema::EngineConfig::Builder::setPriceInputPerMTok},
        TokenPrice{"output_per_mtok", &schema::EngineConfig::Builder::setPriceOutputPerMTok},
        TokenPrice{"cached_input_per_mtok",
                   &schema::EngineConfig::Builder::setPriceCachedInputPerMTok}}) {
    const YAML::Node value = m.Get(price.key);
    if (!value) continue;
    (c.*price.set)(r.Number(value, price.key));
    if (gpu_hour) {
      r.Fail(value, fmt::format("expected either 'gpu_hour' (self-hosted) or token prices (a "
                                "managed API) in 'price', found both ('gpu_hour' and '{}')",
                                price.key));
    }
  }
  if (auto v = m.Get("currency")) c.setCurrency(r.Text(v, "currency"));
  m.Finish();
}

// `lora: {adapters: [{name, path}, ...] | {count, name, path}, max_loras, max_rank,
// max_cpu_loras, backend}`: the adapters served beside the base model. The count form names
// adapter i (1-based) by the patterns' {i}.
void ReadLora(YamlReader& r, const YAML::Node& node, schema::EngineConfig::Builder c) {
  YamlMap m(r, node, "engine_config.lora");
  std::vector<std::pair<std::string, std::string>> adapters;
  if (auto v = m.Get("adapters")) {
    if (v.IsSequence()) {
      for (const auto& item : v) {
        YamlMap a(r, item, "engine_config.lora.adapters[]");
        const YAML::Node name = a.Get("name"), path = a.Get("path");
        a.Finish();
        if (!Present(name) || !Present(path)) {
          r.Fail(item, "expected an adapter as {name: NAME, path: PATH}, found " +
                           DescribeYamlNode(item));
          continue;
        }
        adapters.emplace_back(r.Text(name, "name"), r.Text(path, "path"));
      }
    } else if (v.IsMap()) {
      YamlMap a(r, v, "engine_config.lora.adapters");
      const YAML::Node count = a.Get("count"), name = a.Get("name"), path = a.Get("path");
      a.Finish();
      if (!Present(count) || !Present(path)) {
        r.Fail(v,
               "expected {count: N, path: PATTERN with {i}, name: PATTERN} in "
               "'adapters', found " +
                   DescribeYamlNode(v));
      } else {
        const uint32_t n = r.Uint(count, "count", 1, 4096);
        const std::string path_pattern = r.Text(path, "path");
        const std::string name_pattern = Present(name) ? r.Text(name, "name") : "lora-{i}";
        if (r.ok() && (path_pattern.find("{i}") == std::string::npos ||
                       name_pattern.find("{i}") == std::string::npos)) {
          r.Fail(v,
                 "expected '{i}' (the adapter's number) in the name and path patterns of "
                 "'adapters', found '" +
                     name_pattern + "' and '" + path_pattern + "'");
        }
        auto fill = [](std::string pattern, uint32_t i) {
          for (size_t at; (at = pattern.find("{i}")) != std::string::npos;) {
            pattern.replace(at, 3, std::to_string(i));
          }
          return pattern;
        };
        for (uint32_t i = 1; i <= n && r.ok(); ++i) {
          adapters.emplace_back(fill(name_pattern, i), fill(path_pattern, i));
        }
      }
    } else {
      r.Fail(v, "expected 'adapters' to be a list of {name, path} or {count, name, path}, found " +
                    DescribeYamlNode(v));
    }
    for (size_t i = 0; i < adapters.size() && r.ok(); ++i) {
      const std::string& name = adapters[i].first;
      // SGLang reads "base:adapter" at the first ':'; an empty name selects the base model.
      if (name.empty() || name.find(':') != std::string::npos) {
        r.Fail(v,
               fmt::format("expected adapter names without ':' and not empty, found '{}'", name));
      }
      for (size_t j = 0; j < i && r.ok(); ++j) {
        if (adapters[j].first == name) {
          r.Fail(v, fmt::format("expected distinct adapter names, found '{}' twice", name));
        }
      }
    }
  }
  if (auto v = m.Get("max_loras")) c.setMaxLoras(r.Uint(v, "max_loras", 1));
  if (auto v = m.Get("max_rank")) c.setMaxLoraRank(r.Uint(v, "max_rank", 1));
  if (auto v = m.Get("max_cpu_loras")) c.setMaxCpuLoras(r.Uint(v, "max_cpu_loras", 1));
  if (auto v = m.Get("backend")) c.setLoraBackend(r.Text(v, "backend"));
  m.Finish();
  if (r.failed()) return;
  if (adapters.empty()) {
    return r.Fail(node,
                  "expected 'adapters' in 'engine_config.lora' (a list of {name, path}, or "
                  "{count, name, path}), found none");
  }
  auto list = c.initLoraAdapters(static_cast<unsigned>(adapters.size()));
  for (size_t i = 0; i < adapters.size(); ++i) {
    list[i].setName(adapters[i].first);
    list[i].setPath(adapters[i].second);
  }
}

// `engine_config:` how the engine is started (or reached); the adapters map it to flags.
void ReadEngineConfig(YamlReader& r, const YAML::Node& node, const std::string& matrix_path,
                      schema::EngineConfig::Builder c) {
  YamlMap m(r, node, "engine_config");
  // An engine argument, not a file of this machine: a folder on the engine's node or a hub id.
  if (auto v = m.Get("model_path")) c.setModelPath(r.Text(v, "model_path"));
  if (auto v = m.Get("max_num_seqs")) c.setMaxNumSeqs(r.Uint(v, "max_num_seqs", 1));
  if (auto v = m.Get("max_batched_tokens"))
    c.setMaxBatchedTokens(r.Uint(v, "max_batched_tokens", 1));
  if (auto v = m.Get("context_len")) c.setContextLenTok(r.Uint(v, "context_len", 1));
  if (auto v = m.Get("threads")) c.setThreads(r.Uint(v, "threads", 1));
  if (auto v = m.Get("api_server_count")) c.setApiServerCount(r.Uint(v, "api_server_count", 1));
  if (auto v = m.Get("prefix_caching")) c.setPrefixCaching(ToggleOf(r, v, "prefix_caching"));
  if (auto v = m.Get("chunked_prefill")) c.setChunkedPrefill(ToggleOf(r, v, "chunked_prefill"));
  if (auto v = m.Get("chunked_prefill_tokens")) {
    c.setChunkedPrefillTok(r.Uint(v, "chunked_prefill_tokens", 1));
  }
  if (auto v = m.Get("kv_transfer")) c.setKvTransfer(r.Text(v, "kv_transfer"));
  if (auto v = m.Get("health_path")) c.setHealthPath(r.Text(v, "health_path"));
  if (auto v = m.Get("metrics_persona")) c.setMetricsPersona(r.Text(v, "metrics_persona"));
  if (auto v = m.Get("base_url")) c.setBaseUrl(r.Text(v, "base_url"));
  if (auto v = m.Get("api_key_env")) c.setApiKeyEnv(r.Text(v, "api_key_env"));
  if (auto v = m.Get("api_key_file")) {
    c.setApiKeyFile(ResolveMatrixPath(matrix_path, r.Text(v, "api_key_file")));
  }
  if (auto v = m.Get("dist_port"))
    c.setDistPort(static_cast<uint16_t>(r.Uint(v, "dist_port", 1, 65000)));
  if (auto v = m.Get("gpu_memory_fraction")) {
    const double fraction = r.Number(v, "gpu_memory_fraction");
    if (fraction <= 0 || fraction > 1) {
      r.Fail(v, fmt::format("expected 'gpu_memory_fraction' in (0, 1], found {}", fraction));
    }
    c.setGpuMemoryFraction(fraction);
  }
  if (auto v = m.Get("command")) {
    const auto argv = r.TextList(v, "command");
    if (r.ok() && argv.empty()) {
      r.Fail(v, "expected 'command' to be a non-empty list of strings, found an empty list");
    }
    auto command = c.initCommand(static_cast<unsigned>(argv.size()));
    for (size_t i = 0; i < argv.size(); ++i) command.set(i, argv[i]);
  }
  if (auto v = m.Get("speculative")) ReadSpeculative(r, v, c);
  if (auto v = m.Get("price")) ReadPrice(r, v, c);
  if (auto v = m.Get("lora")) ReadLora(r, v, c);
  m.Finish();
}

}  // namespace

std::string ResolveMatrixPath(const std::string& matrix_path, const std::string& path) {
  if (path.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  const std::filesystem::path folder = std::filesystem::path(matrix_path).parent_path();
  return folder.empty() ? path : (folder / p).lexically_normal().string();
}

void ReadRunKeys(YamlMap& m, const std::string& matrix_path, schema::RunSpec::Builder spec) {
  YamlReader& r = m.reader();
  if (auto v = m.Get("engine")) {
    const std::string engine = r.Text(v, "engine");
    const auto& names = EngineNames();
    if (r.ok() && std::find(names.begin(), names.end(), engine) == names.end()) {
      std::string supported;
      for (const auto& name : names) supported += (supported.empty() ? "" : ", ") + name;
      r.Fail(v, fmt::format("engine '{}' is not supported by this build; expected one of: {}",
                            engine, supported));
    }
    spec.setEngine(engine);
  }
  if (auto v = m.Get("engine_version")) spec.setEngineVersion(r.Text(v, "engine_version"));
  if (auto v = m.Get("image")) spec.setImage(r.Text(v, "image"));
  if (auto v = m.Get("model")) spec.setModel(r.Text(v, "model"));
  if (auto v = m.Get("checkpoint_revision")) {
    spec.setCheckpointRevision(r.Text(v, "checkpoint_revision"));
  }
  if (auto v = m.Get("precision")) spec.setPrecision(r.Text(v, "precision"));
  if (auto v = m.Get("quantization")) spec.setQuantization(r.Text(v, "quantization"));
  if (auto v = m.Get("kv_cache_dtype")) spec.setKvCacheDtype(r.Text(v, "kv_cache_dtype"));
  if (auto v = m.Get("timeout_s")) {
    const double timeout_s = r.Number(v, "timeout_s");
    if (timeout_s <= 0) {
      r.Fail(v, fmt::format("expected 'timeout_s' to be > 0 seconds, found {}", timeout_s));
    }
    spec.setTimeoutS(timeout_s);
  }
  if (auto v = m.Get("max_attempts")) spec.setMaxAttempts(r.Uint(v, "max_attempts", 1));
  if (auto v = m.Get("engine_lifecycle")) {
    const std::string lifecycle = r.Text(v, "engine_lifecycle");
    if (lifecycle == "per_run") {
      spec.setEngineLifecycle(schema::EngineLifecycle::PER_RUN);
    } else if (lifecycle == "per_configuration") {
      spec.setEngineLifecycle(schema::EngineLifecycle::PER_CONFIGURATION);
    } else if (r.ok()) {
      r.Fail(v, fmt::format("expected 'engine_lifecycle' to be per_configuration (one engine for "
                            "the runs of a configuration) or per_run (a cold engine per run), "
                            "found '{}'",
                            lifecycle));
    }
  }
  if (auto v = m.Get("min_success_rate")) {
    const double rate = r.Number(v, "min_success_rate");
    if (rate > 1) {
      r.Fail(v, fmt::format("expected 'min_success_rate' to be a share of requests in [0, 1], "
                            "found {}",
                            rate));
    }
    spec.setMinSuccessRate(rate);
  }
  if (auto v = m.Get("engine_flags")) {
    const auto flags = r.TextList(v, "engine_flags");
    auto list = spec.initEngineFlags(static_cast<unsigned>(flags.size()));
    for (size_t i = 0; i < flags.size(); ++i) list.set(i, flags[i]);
  }
  if (auto v = m.Get("layout")) ReadLayout(r, v, spec.getLayout());
  if (auto v = m.Get("workload")) ReadWorkload(r, v, matrix_path, spec.getWorkload());
  // Workload shorthands, so `concurrency: [1, 8]` can be an axis; they win over `workload:`.
  for (const char* key : {"input_len", "output_len", "num_requests", "concurrency", "max_in_flight",
                          "request_rate", "prefix_hit_rate"}) {
    if (auto v = m.Get(key)) ReadWorkloadKey(r, key, v, matrix_path, spec.getWorkload());
  }
  if (auto v = m.Get("slo")) ReadSlo(r, v, spec.getSlo());
  if (auto v = m.Get("sim")) ReadSim(r, v, matrix_path, spec.getSim());
  if (auto v = m.Get("engine_config")) ReadEngineConfig(r, v, matrix_path, spec.getEngineConfig());
  if (auto v = m.Get("quality")) ReadQuality(r, v, matrix_path, spec.initQuality());
}

}  // namespace servesweep::matrix
