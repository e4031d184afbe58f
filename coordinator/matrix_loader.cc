#include "coordinator/matrix_loader.h"

#include <capnp/serialize.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "common/ids.h"
#include "common/unknown_key.h"
#include "common/yaml_found.h"
#include "coordinator/matrix_expression.h"
#include "perfmodel/profiles.h"
#include "workload/custom_prompts.h"
#include "workload/length_distribution.h"
#include "workload/task_set.h"
#include "workload/trace_reader.h"

namespace servesweep::coordinator {
namespace {

// Tokens per shared-prefix block (Mooncake's hash_ids cover 512-token blocks).
constexpr uint32_t kPrefixBlockTok = 512;

// Engines this build can launch. Others are refused at load time, before any GPU is spent.
const std::vector<std::string> kSupportedEngines = {"sim",      "vllm",     "sglang",
                                                    "llamacpp", "template", "external"};

// Parsing context: the file name for messages, and the first error met.
class Parser {
 public:
  explicit Parser(std::string path) : path_(std::move(path)) {}

  bool failed() const { return !status_.ok(); }
  const Status& status() const { return status_; }

  void Fail(const YAML::Node& node, const std::string& what) {
    if (failed()) return;
    const YAML::Mark mark = node.Mark();
    status_ =
        Status::Error(fmt::format("{}:{}:{}: {}", path_, mark.line + 1, mark.column + 1, what));
  }

  static std::string Found(const YAML::Node& node) { return DescribeYamlNode(node); }

  // Rejects keys outside `allowed`, suggesting the closest one.
  void CheckKeys(const YAML::Node& map, const std::string& section,
                 const std::vector<std::string>& allowed) {
    for (const auto& entry : map) {
      const std::string key = entry.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      Fail(entry.first, UnknownKeyMessage(key, section, allowed));
      return;
    }
  }

  bool ExpectMap(const YAML::Node& node, const std::string& what) {
    if (node.IsMap()) return true;
    Fail(node, fmt::format("expected {} as a mapping, found {}", what, Found(node)));
    return false;
  }

  uint32_t Uint(const YAML::Node& node, const std::string& key, uint32_t min_value) {
    int64_t value = 0;
    if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, value)) {
      Fail(node, fmt::format("expected '{}' to be an integer, found {}", key, Found(node)));
      return min_value;
    }
    if (value < min_value || value > 1'000'000'000) {
      Fail(node,
           fmt::format("expected '{}' to be an integer >= {}, found {}", key, min_value, value));
      return min_value;
    }
    return static_cast<uint32_t>(value);
  }

  double Real(const YAML::Node& node, const std::string& key) {
    double value = 0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || value < 0) {
      Fail(node, fmt::format("expected '{}' to be a number >= 0, found {}", key, Found(node)));
      return 0;
    }
    return value;
  }

  bool Bool(const YAML::Node& node, const std::string& key) {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
      Fail(node, fmt::format("expected '{}' to be true or false, found {}", key, Found(node)));
    }
    return value;
  }

  std::string Text(const YAML::Node& node, const std::string& key) {
    if (!node.IsScalar()) {
      Fail(node, fmt::format("expected '{}' to be a string, found {}", key, Found(node)));
      return "";
    }
    return node.Scalar();
  }

 private:
  std::string path_;
  Status status_;
};

void ApplyLayout(Parser& p, const YAML::Node& node, schema::Layout::Builder layout) {
  if (!p.ExpectMap(node, "'layout'")) return;
  p.CheckKeys(node, "layout",
              {"tp", "pp", "dp", "ep", "dp_attention", "prefill_instances", "decode_instances",
               "gpus_per_node"});
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    if (key == "tp") layout.setTp(p.Uint(value, key, 1));
    if (key == "pp") layout.setPp(p.Uint(value, key, 1));
    if (key == "dp") layout.setDp(p.Uint(value, key, 1));
    if (key == "ep") layout.setExpertParallel(p.Bool(value, key));
    if (key == "dp_attention") layout.setDpAttention(p.Bool(value, key));
    if (key == "prefill_instances") layout.setPrefillInstances(p.Uint(value, key, 0));
    if (key == "decode_instances") layout.setDecodeInstances(p.Uint(value, key, 0));
    if (key == "gpus_per_node") layout.setGpusPerNode(p.Uint(value, key, 1));
  }
}

// Workload keys may stand in `workload:` or, for sweeping, directly as axes.
const std::vector<std::string> kWorkloadKeys = {"name",
                                                "api",
                                                "input_len",
                                                "output_len",
                                                "num_requests",
                                                "warmup_requests",
                                                "concurrency",
                                                "request_rate",
                                                "seed",
                                                "ignore_eos",
                                                "temperature",
                                                "trace",
                                                "trace_format",
                                                "trace_speedup",
                                                "replay_arrivals",
                                                "burstiness",
                                                "prompt",
                                                "shared_prefix",
                                                "arrival",
                                                "ramp",
                                                "warmup_s",
                                                "duration_s",
                                                "drain_timeout_s",
                                                "sessions",
                                                "prompts",
                                                "client_threads"};

// `{distribution: uniform, low: 64, high: 512, min: 1, max: 4096}` (or normal: mean/std,
// lognormal: median/sigma) into a length distribution.
void ApplyLengthDistribution(Parser& p, const std::string& key, const YAML::Node& value,
                             schema::LengthDistribution::Builder d) {
  p.CheckKeys(value, "'" + key + "'",
              {"distribution", "low", "high", "mean", "std", "median", "sigma", "min", "max",
               "trace", "trace_format"});
  if (value["distribution"] && value["distribution"].IsScalar() &&
      value["distribution"].Scalar() == "empirical") {
    if (!value["trace"]) {
      p.Fail(value, fmt::format("expected '{}.trace' (the trace whose lengths to draw from) for "
                                "an empirical distribution, found none",
                                key));
      return;
    }
    d.setKind("empirical");
    d.setTrace(p.Text(value["trace"], "trace"));
    if (value["trace_format"]) d.setTraceFormat(p.Text(value["trace_format"], "trace_format"));
    if (value["min"]) d.setMin(p.Uint(value["min"], "min", 1));
    if (value["max"]) d.setMax(p.Uint(value["max"], "max", 1));
    return;
  }
  if (!value["distribution"]) {
    p.Fail(value, fmt::format(
                      "expected '{}.distribution' (uniform, normal, lognormal or empirical), found "
                      "none",
                      key));
    return;
  }
  const std::string kind = p.Text(value["distribution"], "distribution");
  const std::vector<std::pair<std::string, std::string>> params =
      kind == "uniform"     ? std::vector<std::pair<std::string, std::string>>{{"low", "high"}}
      : kind == "normal"    ? std::vector<std::pair<std::string, std::string>>{{"mean", "std"}}
      : kind == "lognormal" ? std::vector<std::pair<std::string, std::string>>{{"median", "sigma"}}
                            : std::vector<std::pair<std::string, std::string>>{};
  if (params.empty()) {
    p.Fail(value["distribution"], fmt::format("expected '{}.distribution' to be uniform, normal, "
                                              "lognormal or empirical, found '{}'",
                                              key, kind));
    return;
  }
  const auto& [first, second] = params[0];
  for (const std::string& name : {first, second}) {
    if (!value[name]) {
      p.Fail(value,
             fmt::format("expected '{}.{}' for a {} distribution, found none", key, name, kind));
      return;
    }
  }
  d.setKind(kind);
  d.setA(p.Real(value[first], first));
  d.setB(p.Real(value[second], second));
  if (value["min"]) d.setMin(p.Uint(value["min"], "min", 1));
  if (value["max"]) d.setMax(p.Uint(value["max"], "max", 1));
  if (kind == "uniform" && d.getB() < d.getA()) {
    p.Fail(value, fmt::format("expected '{}.high' >= low, found {} < {}", key, d.getB(), d.getA()));
  }
}

void ApplyWorkloadKey(Parser& p, const std::string& key, const YAML::Node& value,
                      schema::Workload::Builder w) {
  if ((key == "input_len" || key == "output_len") && value.IsMap()) {
    ApplyLengthDistribution(
        p, key, value,
        key == "input_len" ? w.getInputLenDistribution() : w.getOutputLenDistribution());
    return;
  }
  if (key == "name") w.setName(p.Text(value, key));
  if (key == "input_len") w.setInputLenTok(p.Uint(value, key, 1));
  if (key == "output_len") w.setOutputLenTok(p.Uint(value, key, 1));
  if (key == "num_requests") w.setNumRequests(p.Uint(value, key, 1));
  if (key == "warmup_requests") w.setWarmupRequests(p.Uint(value, key, 0));
  if (key == "client_threads") {
    const uint32_t threads = p.Uint(value, key, 1);
    if (threads > 64) {
      p.Fail(value, fmt::format("expected 'client_threads' from 1 to 64, found {}", threads));
    }
    w.setClientThreads(threads);
  }
  if (key == "concurrency") w.setConcurrency(p.Uint(value, key, 1));
  if (key == "request_rate") w.setRequestRatePerS(p.Real(value, key));
  if (key == "seed") w.setSeed(p.Uint(value, key, 0));
  if (key == "ignore_eos") w.setIgnoreEos(p.Bool(value, key));
  if (key == "temperature") w.setTemperature(p.Real(value, key));
  if (key == "trace") w.setTrace(p.Text(value, key));  // expanded into the plan later
  if (key == "trace_format") w.setTraceFormat(p.Text(value, key));
  if (key == "replay_arrivals") w.setReplayArrivals(p.Bool(value, key));
  if (key == "prompt") {
    const std::string prompt = p.Text(value, key);
    if (prompt != "text" && prompt != "token_ids") {
      p.Fail(value, fmt::format("expected 'prompt' to be text or token_ids, found '{}'", prompt));
    }
    w.setTokenIdPrompts(prompt == "token_ids");
  }
  if (key == "shared_prefix" && p.ExpectMap(value, "'shared_prefix'")) {
    p.CheckKeys(value, "shared_prefix", {"groups", "prefix_len"});
    if (!value["groups"] || !value["prefix_len"]) {
      p.Fail(value,
             "expected 'shared_prefix: {groups: G, prefix_len: TOKENS}', found a key missing");
      return;
    }
    w.setSharedPrefixGroups(p.Uint(value["groups"], "groups", 1));
    w.setSharedPrefixLenTok(p.Uint(value["prefix_len"], "prefix_len", 1));
  }
  if (key == "arrival") {
    const std::string arrival = p.Text(value, key);
    if (arrival != "poisson" && arrival != "constant") {
      p.Fail(value, fmt::format("expected 'arrival' to be poisson or constant (gamma: poisson "
                                "with 'burstiness'), found '{}'",
                                arrival));
    }
    w.setArrival(arrival);
  }
  if (key == "ramp" &&
      p.ExpectMap(value, "'ramp' ({kind: linear, start_rate: R0, end_rate: R1})")) {
    p.CheckKeys(value, "ramp", {"kind", "start_rate", "end_rate"});
    for (const char* needed : {"kind", "start_rate", "end_rate"}) {
      if (!value[needed]) {
        p.Fail(value, fmt::format("expected 'ramp.{}' ({{kind: linear|exponential, start_rate: "
                                  "R0, end_rate: R1}}), found none",
                                  needed));
        return;
      }
    }
    const std::string kind = p.Text(value["kind"], "kind");
    if (kind != "linear" && kind != "exponential") {
      p.Fail(value["kind"],
             fmt::format("expected 'ramp.kind' to be linear or exponential, found '{}'", kind));
    }
    w.setRamp(kind);
    for (const char* rate : {"start_rate", "end_rate"}) {
      const double r = p.Real(value[rate], rate);
      if (!(r > 0)) p.Fail(value[rate], fmt::format("expected 'ramp.{}' > 0, found {}", rate, r));
      if (std::string(rate) == "start_rate") {
        w.setRampStartRatePerS(r);
      } else {
        w.setRampEndRatePerS(r);
      }
    }
  }
  if (key == "warmup_s") w.setWarmupS(p.Real(value, key));
  if (key == "duration_s") {
    const double duration_s = p.Real(value, key);
    if (!(duration_s > 0)) {
      p.Fail(value, fmt::format("expected 'duration_s' > 0 seconds, found {}", duration_s));
    }
    w.setDurationS(duration_s);
  }
  if (key == "drain_timeout_s") w.setDrainTimeoutS(p.Real(value, key));
  if (key == "sessions" &&
      p.ExpectMap(value, "'sessions' ({count: N, turns: T, think_time_s: S})")) {
    p.CheckKeys(value, "sessions", {"count", "turns", "think_time_s", "think_time"});
    if (!value["count"] || !value["turns"]) {
      p.Fail(value, "expected 'sessions: {count: N, turns: T}', found a key missing");
      return;
    }
    w.setSessions(p.Uint(value["count"], "count", 1));
    w.setTurns(p.Uint(value["turns"], "turns", 1));
    if (value["think_time_s"]) w.setThinkTimeS(p.Real(value["think_time_s"], "think_time_s"));
    if (value["think_time"]) {
      const std::string shape = p.Text(value["think_time"], "think_time");
      if (shape != "fixed" && shape != "exponential") {
        p.Fail(value["think_time"],
               fmt::format("expected 'sessions.think_time' to be fixed or exponential, found '{}'",
                           shape));
      }
      w.setThinkTimeExponential(shape == "exponential");
    }
  }
  if (key == "prompts") w.setPrompts(p.Text(value, key));  // read in ExpandCustomPrompts
  if (key == "burstiness") {
    const double burstiness = p.Real(value, key);
    if (burstiness <= 0) {
      p.Fail(value, fmt::format("expected 'burstiness' > 0 (1 = Poisson), found {}", burstiness));
    }
    w.setBurstiness(burstiness);
  }
  if (key == "trace_speedup") {
    const double speedup = p.Real(value, key);
    if (speedup <= 0) {
      p.Fail(value, fmt::format("expected 'trace_speedup' > 0, found {}", speedup));
    }
    w.setTraceSpeedup(speedup);
  }
  if (key == "api") {
    const std::string api = p.Text(value, key);
    if (api == "completions") {
      w.setApi(schema::ApiKind::COMPLETIONS);
    } else if (api == "chat") {
      w.setApi(schema::ApiKind::CHAT_COMPLETIONS);
    } else {
      p.Fail(value, fmt::format("expected 'api' to be completions or chat, found '{}'", api));
    }
  }
}

void ApplyWorkload(Parser& p, const YAML::Node& node, schema::Workload::Builder w) {
  if (!p.ExpectMap(node, "'workload'")) return;
  p.CheckKeys(node, "workload", kWorkloadKeys);
  for (const auto& entry : node) ApplyWorkloadKey(p, entry.first.Scalar(), entry.second, w);
}

void ApplySim(Parser& p, const YAML::Node& node, schema::SimSettings::Builder sim) {
  if (!p.ExpectMap(node, "'sim'")) return;
  p.CheckKeys(node, "sim",
              {"ttft_ms", "itl_ms", "startup_ms", "hardware", "model_profile", "spec_accepted_tok",
               "answer_accuracy"});
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (key == "ttft_ms") sim.setTtftMs(p.Real(entry.second, key));
    if (key == "itl_ms") sim.setItlMs(p.Real(entry.second, key));
    if (key == "startup_ms") sim.setStartupMs(p.Real(entry.second, key));
    if (key == "spec_accepted_tok") sim.setSpecAcceptedTok(p.Real(entry.second, key));
    if (key == "answer_accuracy") {
      const double accuracy = p.Real(entry.second, key);
      if (accuracy > 1) {
        p.Fail(entry.second,
               fmt::format("expected 'answer_accuracy' to be a probability in [0, 1], found {}",
                           accuracy));
      }
      sim.setAnswerAccuracy(accuracy);
    }
    // Profiles are checked here, so a typo fails before any run starts.
    if (key == "hardware") {
      perfmodel::HardwareProfile hardware;
      const std::string name = p.Text(entry.second, key);
      if (Status s = perfmodel::LoadHardwareProfile(name, &hardware); !p.failed() && !s.ok()) {
        p.Fail(entry.second, s.message());
      }
      sim.setHardware(name);
    }
    if (key == "model_profile") {
      perfmodel::ModelProfile model;
      const std::string name = p.Text(entry.second, key);
      if (Status s = perfmodel::LoadModelProfile(name, &model); !p.failed() && !s.ok()) {
        p.Fail(entry.second, s.message());
      }
      sim.setModelProfile(name);
    }
  }
}

// `quality: {task_set: arithmetic | FILE.jsonl, count, seed, margin, max_tokens, numeric}`; the
// tasks themselves are expanded per run by ExpandQuality.
void ApplyQuality(Parser& p, const YAML::Node& node, schema::QualitySettings::Builder q) {
  if (!p.ExpectMap(node, "'quality'")) return;
  p.CheckKeys(node, "quality", {"task_set", "count", "seed", "margin", "max_tokens", "numeric"});
  bool numeric_set = false;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (key == "task_set") q.setTaskSet(p.Text(entry.second, key));
    if (key == "count") q.setCount(p.Uint(entry.second, key, 1));
    if (key == "seed") q.setSeed(p.Uint(entry.second, key, 0));
    if (key == "margin") {
      const double margin = p.Real(entry.second, key);
      if (margin > 1) {
        p.Fail(entry.second,
               fmt::format("expected 'margin' to be an accuracy difference in [0, 1], found {}",
                           margin));
      }
      q.setMarginAccuracy(margin);
    }
    if (key == "max_tokens") q.setMaxTokens(p.Uint(entry.second, key, 1));
    if (key == "numeric") {
      q.setNumericAnswers(p.Bool(entry.second, key));
      numeric_set = true;
    }
  }
  if (p.failed()) return;
  if (q.getTaskSet().size() == 0) {
    p.Fail(node, "expected 'task_set' in 'quality' (arithmetic, or a .jsonl file), found none");
    return;
  }
  if (q.getTaskSet() == "arithmetic") {
    if (q.getCount() == 0) q.setCount(50);
    if (!numeric_set) q.setNumericAnswers(true);
  }
}

void ApplySlo(Parser& p, const YAML::Node& node, schema::Slo::Builder slo) {
  if (!p.ExpectMap(node, "'slo'")) return;
  p.CheckKeys(node, "slo", {"ttft_ms", "tpot_ms", "e2el_ms"});
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (key == "ttft_ms") slo.setTtftMs(p.Real(entry.second, key));
    if (key == "tpot_ms") slo.setTpotMs(p.Real(entry.second, key));
    if (key == "e2el_ms") slo.setE2elMs(p.Real(entry.second, key));
  }
}

schema::EngineConfig::Toggle ToggleOf(Parser& p, const YAML::Node& value, const std::string& key) {
  if (value.IsScalar() && value.Scalar() == "default") return schema::EngineConfig::Toggle::DEFAULT;
  return p.Bool(value, key) ? schema::EngineConfig::Toggle::ON : schema::EngineConfig::Toggle::OFF;
}

// `engine_config:` how the engine is started (or reached); the adapters map it to flags.
void ApplyEngineConfig(Parser& p, const YAML::Node& node, schema::EngineConfig::Builder c) {
  if (!p.ExpectMap(node, "'engine_config'")) return;
  p.CheckKeys(node, "engine_config",
              {"model_path", "max_num_seqs", "max_batched_tokens", "context_len", "threads",
               "prefix_caching", "chunked_prefill", "chunked_prefill_tokens", "speculative",
               "kv_transfer", "gpu_memory_fraction", "dist_port", "command", "health_path",
               "metrics_persona", "base_url", "api_key_env", "api_key_file", "price"});
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    if (key == "model_path") c.setModelPath(p.Text(value, key));
    if (key == "max_num_seqs") c.setMaxNumSeqs(p.Uint(value, key, 1));
    if (key == "max_batched_tokens") c.setMaxBatchedTokens(p.Uint(value, key, 1));
    if (key == "context_len") c.setContextLenTok(p.Uint(value, key, 1));
    if (key == "threads") c.setThreads(p.Uint(value, key, 1));
    if (key == "prefix_caching") c.setPrefixCaching(ToggleOf(p, value, key));
    if (key == "chunked_prefill") c.setChunkedPrefill(ToggleOf(p, value, key));
    if (key == "chunked_prefill_tokens") c.setChunkedPrefillTok(p.Uint(value, key, 1));
    if (key == "kv_transfer") c.setKvTransfer(p.Text(value, key));
    if (key == "health_path") c.setHealthPath(p.Text(value, key));
    if (key == "metrics_persona") c.setMetricsPersona(p.Text(value, key));
    if (key == "base_url") c.setBaseUrl(p.Text(value, key));
    if (key == "api_key_env") c.setApiKeyEnv(p.Text(value, key));
    if (key == "api_key_file") c.setApiKeyFile(p.Text(value, key));
    if (key == "dist_port") {
      const uint32_t port = p.Uint(value, key, 1);
      if (port > 65000) {
        p.Fail(value, fmt::format("expected 'dist_port' to be a port <= 65000, found {}", port));
      }
      c.setDistPort(static_cast<uint16_t>(port));
    }
    if (key == "gpu_memory_fraction") {
      const double fraction = p.Real(value, key);
      if (fraction <= 0 || fraction > 1) {
        p.Fail(value, fmt::format("expected 'gpu_memory_fraction' in (0, 1], found {}", fraction));
      }
      c.setGpuMemoryFraction(fraction);
    }
    if (key == "command") {
      if (!value.IsSequence() || value.size() == 0) {
        p.Fail(value, fmt::format("expected 'command' to be a non-empty list of strings, found {}",
                                  Parser::Found(value)));
        continue;
      }
      auto command = c.initCommand(static_cast<unsigned>(value.size()));
      for (size_t i = 0; i < value.size(); ++i) command.set(i, p.Text(value[i], key));
    }
    if (key == "speculative") {
      if (!p.ExpectMap(value, "'speculative'")) continue;
      p.CheckKeys(value, "speculative", {"method", "model", "num_tokens"});
      if (value["method"]) c.setSpecMethod(p.Text(value["method"], "method"));
      if (value["model"]) c.setSpecModel(p.Text(value["model"], "model"));
      if (value["num_tokens"]) c.setSpecNumTokens(p.Uint(value["num_tokens"], "num_tokens", 1));
    }
    if (key == "price") {
      if (!p.ExpectMap(value, "'price'")) continue;
      p.CheckKeys(
          value, "price",
          {"gpu_hour", "input_per_mtok", "output_per_mtok", "cached_input_per_mtok", "currency"});
      // Prices are numbers >= 0 (Real); GPU time or tokens, not both (one bill, not two).
      auto price = [&](const char* name) { return p.Real(value[name], name); };
      if (value["gpu_hour"]) c.setPriceGpuHour(price("gpu_hour"));
      if (value["input_per_mtok"]) c.setPriceInputPerMTok(price("input_per_mtok"));
      if (value["output_per_mtok"]) c.setPriceOutputPerMTok(price("output_per_mtok"));
      if (value["cached_input_per_mtok"])
        c.setPriceCachedInputPerMTok(price("cached_input_per_mtok"));
      if (value["currency"]) c.setCurrency(p.Text(value["currency"], "currency"));
      if (value["gpu_hour"]) {
        for (const char* token : {"input_per_mtok", "output_per_mtok", "cached_input_per_mtok"}) {
          if (value[token]) {
            p.Fail(value[token],
                   fmt::format("expected either 'gpu_hour' (self-hosted) or token prices (a "
                               "managed API) in 'price', found both ('gpu_hour' and '{}')",
                               token));
            break;
          }
        }
      }
    }
  }
}

// Keys that describe one run: allowed at the top level and as axes.
const std::vector<std::string> kRunKeys = {
    "engine", "engine_version", "engine_flags", "image", "model", "checkpoint_revision",
    "precision", "quantization", "kv_cache_dtype", "layout", "workload", "slo", "sim", "timeout_s",
    "max_attempts", "engine_config", "quality",
    // workload shorthands, so `concurrency: [1, 8]` can be an axis
    "input_len", "output_len", "num_requests", "concurrency", "request_rate"};

void ApplyRunKey(Parser& p, const std::string& key, const YAML::Node& value,
                 schema::RunSpec::Builder spec) {
  if (key == "engine") {
    const std::string engine = p.Text(value, key);
    if (!p.failed() && std::find(kSupportedEngines.begin(), kSupportedEngines.end(), engine) ==
                           kSupportedEngines.end()) {
      std::string supported;
      for (const auto& name : kSupportedEngines)
        supported += (supported.empty() ? "" : ", ") + name;
      p.Fail(value, fmt::format("engine '{}' is not supported by this build; expected one of: {}",
                                engine, supported));
    }
    spec.setEngine(engine);
  }
  if (key == "engine_version") spec.setEngineVersion(p.Text(value, key));
  if (key == "image") spec.setImage(p.Text(value, key));
  if (key == "model") spec.setModel(p.Text(value, key));
  if (key == "checkpoint_revision") spec.setCheckpointRevision(p.Text(value, key));
  if (key == "precision") spec.setPrecision(p.Text(value, key));
  if (key == "quantization") spec.setQuantization(p.Text(value, key));
  if (key == "kv_cache_dtype") spec.setKvCacheDtype(p.Text(value, key));
  if (key == "timeout_s") {
    const double timeout_s = p.Real(value, key);
    if (timeout_s <= 0)
      p.Fail(value, fmt::format("expected 'timeout_s' to be > 0 seconds, found {}", timeout_s));
    spec.setTimeoutS(timeout_s);
  }
  if (key == "max_attempts") spec.setMaxAttempts(p.Uint(value, key, 1));
  if (key == "engine_flags") {
    if (!value.IsSequence()) {
      p.Fail(value, fmt::format("expected 'engine_flags' to be a list of strings, found {}",
                                Parser::Found(value)));
      return;
    }
    auto flags = spec.initEngineFlags(static_cast<unsigned>(value.size()));
    for (size_t i = 0; i < value.size(); ++i) flags.set(i, p.Text(value[i], key));
  }
  if (key == "layout") ApplyLayout(p, value, spec.getLayout());
  if (key == "workload") ApplyWorkload(p, value, spec.getWorkload());
  if (key == "slo") ApplySlo(p, value, spec.getSlo());
  if (key == "sim") ApplySim(p, value, spec.getSim());
  if (key == "engine_config") ApplyEngineConfig(p, value, spec.getEngineConfig());
  if (key == "quality") ApplyQuality(p, value, spec.initQuality());
  if (key == "input_len" || key == "output_len" || key == "num_requests" || key == "concurrency" ||
      key == "request_rate") {
    ApplyWorkloadKey(p, key, value, spec.getWorkload());
  }
}

// A short label of the axis values that make this run differ from its siblings.
std::string AxisLabel(const std::string& axis, const YAML::Node& value) {
  if (value.IsScalar()) return fmt::format("{}={}", axis, value.Scalar());
  if (value.IsMap()) {
    std::string out;
    for (const auto& entry : value) {
      std::string rendered = entry.second.IsScalar() ? entry.second.Scalar() : "...";
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", entry.first.Scalar(), rendered);
    }
    return out;
  }
  return axis + "=...";
}

// Trace requests already read, by path: a matrix sweeping other axes replays one trace often.
using TraceCache = std::map<std::string, std::vector<workload::TraceRequest>>;

// Expands `workload.trace` into the run's plan: the first num_requests requests of the trace,
// their arrival offsets divided by trace_speedup. The means become input/output_len (warm-up).
void ExpandTrace(Parser& p, const YAML::Node& where, const std::string& matrix_path,
                 TraceCache& cache, schema::Workload::Builder w) {
  if (w.getTrace().size() == 0 || p.failed()) return;
  std::filesystem::path path(std::string(w.getTrace().cStr()));
  if (path.is_relative()) path = std::filesystem::path(matrix_path).parent_path() / path;
  workload::TraceFormat format;
  if (Status s = workload::ParseTraceFormat(w.getTraceFormat().cStr(), path.string(), &format);
      !s.ok()) {
    p.Fail(where, s.message());
    return;
  }
  if (w.getNumRequests() == 0) {
    p.Fail(where,
           "expected 'num_requests' (how many of the trace's requests to replay), found none");
    return;
  }
  const std::string key = fmt::format("{}|{}", path.string(), static_cast<int>(format));
  auto& requests = cache[key];
  if (requests.size() < w.getNumRequests()) {
    if (Status s = workload::ReadTrace(path.string(), format, w.getNumRequests(), &requests);
        !s.ok()) {
      p.Fail(where, s.message());
      return;
    }
  }
  if (requests.size() < w.getNumRequests()) {
    p.Fail(where, fmt::format("{}: expected at least {} requests (num_requests), found {}",
                              path.string(), w.getNumRequests(), requests.size()));
    return;
  }
  auto plan = w.initPlan(w.getNumRequests());
  uint64_t input_sum = 0, output_sum = 0;
  for (uint32_t i = 0; i < w.getNumRequests(); ++i) {
    plan[i].setOffsetNs(static_cast<int64_t>(requests[i].offset_ns / w.getTraceSpeedup()));
    plan[i].setInputLenTok(std::max<uint32_t>(1, requests[i].input_len_tok));
    plan[i].setOutputLenTok(std::max<uint32_t>(1, requests[i].output_len_tok));
    const auto& hash_ids = requests[i].hash_ids;
    if (!hash_ids.empty()) {
      auto blocks = plan[i].initPrefixBlocks(static_cast<unsigned>(hash_ids.size()));
      for (size_t b = 0; b < hash_ids.size(); ++b) blocks.set(b, hash_ids[b]);
      plan[i].setPrefixLenTok(std::min<uint32_t>(
          plan[i].getInputLenTok(), static_cast<uint32_t>(hash_ids.size()) * kPrefixBlockTok));
    }
    input_sum += plan[i].getInputLenTok();
    output_sum += plan[i].getOutputLenTok();
  }
  w.setInputLenTok(
      static_cast<uint32_t>((input_sum + w.getNumRequests() / 2) / w.getNumRequests()));
  w.setOutputLenTok(
      static_cast<uint32_t>((output_sum + w.getNumRequests() / 2) / w.getNumRequests()));
  w.setTrace(fmt::format("{}:{}", format == workload::TraceFormat::kAzureCsv ? "azure" : "mooncake",
                         path.filename().string()));
  if (w.getName().size() == 0) w.setName(fmt::format("trace-{}", path.stem().string()));
}

// Task sets already read or generated, by source: every run of a sweep carries the same tasks.
using TaskCache = std::map<std::string, std::vector<workload::QualityTask>>;

// Expands `quality.task_set` into the run spec's tasks (generated arithmetic, or the JSONL file
// relative to the matrix), so agents need no file. taskSet becomes "arithmetic" or
// "jsonl:<file name>".
void ExpandQuality(Parser& p, const YAML::Node& where, const std::string& matrix_path,
                   TaskCache& cache, schema::QualitySettings::Builder q) {
  if (q.getTaskSet().size() == 0 || q.getTasks().size() > 0 || p.failed()) return;
  const std::string source = q.getTaskSet().cStr();
  std::string key, label;
  std::filesystem::path path;
  if (source == "arithmetic") {
    key = fmt::format("arithmetic|{}|{}", q.getCount(), q.getSeed());
    label = "arithmetic";
  } else {
    path = std::filesystem::path(source);
    if (path.is_relative()) path = std::filesystem::path(matrix_path).parent_path() / path;
    if (path.extension() != ".jsonl") {
      p.Fail(where, fmt::format("expected 'quality.task_set' to be 'arithmetic' or a .jsonl file "
                                "of {{\"prompt\", \"answer\"}} lines, found '{}'",
                                source));
      return;
    }
    key = fmt::format("jsonl|{}|{}", path.string(), q.getCount());
    label = "jsonl:" + path.filename().string();
  }
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::vector<workload::QualityTask> tasks;
    if (source == "arithmetic") {
      tasks = workload::GenerateArithmeticTasks(q.getCount(), q.getSeed());
    } else if (Status s = workload::LoadTaskJsonl(path.string(), q.getCount(), &tasks); !s.ok()) {
      p.Fail(where, s.message());
      return;
    }
    it = cache.emplace(key, std::move(tasks)).first;
  }
  auto list = q.initTasks(static_cast<unsigned>(it->second.size()));
  for (size_t i = 0; i < it->second.size(); ++i) {
    list[i].setPrompt(it->second[i].prompt);
    list[i].setAnswer(it->second[i].answer);
  }
  q.setTaskSet(label);
  q.setCount(static_cast<uint32_t>(it->second.size()));
}

workload::LengthDistribution FromSchema(schema::LengthDistribution::Reader d, uint32_t fixed) {
  workload::LengthDistribution out;
  out.kind = d.getKind().size() ? std::string(d.getKind().cStr()) : "fixed";
  out.a = out.kind == "fixed" ? fixed : d.getA();
  out.b = d.getB();
  out.min = d.getMin();
  out.max = d.getMax();
  return out;
}

// Samples each request's lengths into the plan when a length is not fixed (seeded by the
// workload's seed: the same matrix gives the same lengths). The means become input/output_len.
// The lengths an empirical distribution draws from: the trace's input (or output) lengths.
void ReadEmpiricalLengths(Parser& p, const YAML::Node& where, const std::string& matrix_path,
                          TraceCache& cache, schema::LengthDistribution::Reader d, bool input,
                          workload::LengthDistribution* out) {
  if (out->kind != "empirical" || p.failed()) return;
  std::filesystem::path path(std::string(d.getTrace().cStr()));
  if (path.is_relative()) path = std::filesystem::path(matrix_path).parent_path() / path;
  workload::TraceFormat format;
  if (Status s = workload::ParseTraceFormat(d.getTraceFormat().cStr(), path.string(), &format);
      !s.ok()) {
    return p.Fail(where, s.message());
  }
  auto& requests = cache[fmt::format("{}|{}|all", path.string(), static_cast<int>(format))];
  if (requests.empty()) {
    if (Status s = workload::ReadTrace(path.string(), format, 0, &requests); !s.ok()) {
      return p.Fail(where, s.message());
    }
  }
  if (requests.empty()) {
    return p.Fail(where, fmt::format("{}: expected requests to draw lengths from, found none",
                                     path.string()));
  }
  out->source = std::string(d.getTrace().cStr());
  for (const auto& r : requests) {
    out->values.push_back(std::max<uint32_t>(1, input ? r.input_len_tok : r.output_len_tok));
  }
}

void ExpandLengthDistributions(Parser& p, const YAML::Node& where, const std::string& matrix_path,
                               TraceCache& cache, schema::Workload::Builder w) {
  auto in = FromSchema(w.getInputLenDistribution(), w.getInputLenTok());
  auto out = FromSchema(w.getOutputLenDistribution(), w.getOutputLenTok());
  if ((in.kind == "fixed" && out.kind == "fixed") || p.failed()) return;
  ReadEmpiricalLengths(p, where, matrix_path, cache, w.getInputLenDistribution(), true, &in);
  ReadEmpiricalLengths(p, where, matrix_path, cache, w.getOutputLenDistribution(), false, &out);
  if (p.failed()) return;
  if (w.getTrace().size() > 0) {
    p.Fail(where, "expected either 'trace' or length distributions, found both");
    return;
  }
  if ((in.kind == "fixed" && in.a == 0) || (out.kind == "fixed" && out.a == 0)) {
    p.Fail(where,
           "expected both 'input_len' and 'output_len' (a number or a distribution), found one");
    return;
  }
  const uint32_t n = w.getNumRequests();
  if (n == 0) return;  // reported by CheckRunIsRunnable
  const auto inputs = workload::SampleLengths(in, n, w.getSeed() * 2 + 1);
  const auto outputs = workload::SampleLengths(out, n, w.getSeed() * 2 + 2);
  auto plan = w.initPlan(n);
  uint64_t input_sum = 0, output_sum = 0;
  for (uint32_t i = 0; i < n; ++i) {
    plan[i].setInputLenTok(inputs[i]);
    plan[i].setOutputLenTok(outputs[i]);
    input_sum += inputs[i];
    output_sum += outputs[i];
  }
  w.setReplayArrivals(false);
  w.setInputLenTok(static_cast<uint32_t>((input_sum + n / 2) / n));
  w.setOutputLenTok(static_cast<uint32_t>((output_sum + n / 2) / n));
  if (w.getName().size() == 0) {
    w.setName(fmt::format("dist-in{}-out{}", w.getInputLenTok(), w.getOutputLenTok()));
  }
}

// Shared-prefix groups into the plan: request i's first prefix_len tokens are group
// (i mod groups)'s, as block ids that hash the group and the block; a plan is made when the
// lengths are fixed.
void ExpandSharedPrefixes(Parser& p, const YAML::Node& where, schema::Workload::Builder w) {
  const uint32_t groups = w.getSharedPrefixGroups();
  if (groups == 0 || p.failed()) return;
  if (w.getTrace().size() > 0) {
    p.Fail(where,
           "expected either 'trace' (its own shared prefixes) or 'shared_prefix', found both");
    return;
  }
  const uint32_t n = w.getNumRequests();
  if (n == 0) return;  // reported by CheckRunIsRunnable
  if (w.getPlan().size() != n) {
    auto plan = w.initPlan(n);
    for (uint32_t i = 0; i < n; ++i) {
      plan[i].setInputLenTok(w.getInputLenTok());
      plan[i].setOutputLenTok(w.getOutputLenTok());
    }
    w.setReplayArrivals(false);
  }
  auto plan = w.getPlan();
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t shared = std::min(w.getSharedPrefixLenTok(), plan[i].getInputLenTok());
    const uint32_t blocks = (shared + kPrefixBlockTok - 1) / kPrefixBlockTok;
    auto ids = plan[i].initPrefixBlocks(blocks);
    for (uint32_t b = 0; b < blocks; ++b) {
      ids.set(b, StableHash64(fmt::format("prefix-group/{}/{}/{}", w.getSeed(), i % groups, b)));
    }
    plan[i].setPrefixLenTok(shared);
  }
}

// `prompts: jsonl:<file>` (relative to the matrix) into the spec's custom prompts; a bad line is
// reported at the matrix's place with the file's own line.
void ExpandCustomPrompts(Parser& p, const YAML::Node& where, const std::string& matrix_path,
                         schema::Workload::Builder w) {
  if (w.getPrompts().size() == 0 || p.failed()) return;
  std::string file;
  if (!workload::ParsePromptsSpec(w.getPrompts().cStr(), &file)) {
    p.Fail(where,
           fmt::format("expected 'prompts: jsonl:<file>', found '{}'", w.getPrompts().cStr()));
    return;
  }
  std::filesystem::path path(file);
  if (path.is_relative()) path = std::filesystem::path(matrix_path).parent_path() / path;
  std::vector<workload::CustomPromptLine> lines;
  if (Status s = workload::ReadCustomPrompts(path.string(), &lines); !s.ok()) {
    p.Fail(where, s.message());
    return;
  }
  if (w.getTrace().size() > 0 || w.getPlan().size() > 0 || w.getSessions() > 0 ||
      w.getTokenIdPrompts()) {
    p.Fail(where,
           "expected 'prompts' alone: it takes no trace, length distributions, shared prefix, "
           "sessions or 'prompt: token_ids'");
    return;
  }
  auto out = w.initCustomPrompts(static_cast<unsigned>(lines.size()));
  uint64_t words = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    out[i].setPrompt(lines[i].prompt);
    out[i].setMessagesJson(lines[i].messages_json);
    out[i].setMaxTokens(lines[i].max_tokens);
    std::istringstream text(lines[i].prompt + " " + lines[i].messages_json);
    words += std::distance(std::istream_iterator<std::string>(text),
                           std::istream_iterator<std::string>());
  }
  // Without input_len, warm-up prompts take the file's mean length in words (a rough size).
  if (w.getInputLenTok() == 0) {
    w.setInputLenTok(static_cast<uint32_t>(std::max<uint64_t>(1, words / lines.size())));
  }
}

void CheckRunIsRunnable(Parser& p, const YAML::Node& where, schema::RunSpec::Reader spec) {
  const auto w = spec.getWorkload();
  if (spec.getEngine().size() == 0)
    p.Fail(where, "expected 'engine' (e.g. engine: sim), found none");
  if (spec.getModel().size() == 0)
    p.Fail(where, "expected 'model' (the served model name), found none");
  if (w.getInputLenTok() == 0)
    p.Fail(where, "expected 'input_len' (tokens per prompt), found none");
  if (w.getOutputLenTok() == 0)
    p.Fail(where, "expected 'output_len' (tokens per response), found none");
  const bool by_duration = w.getDurationS() > 0;
  if (w.getNumRequests() == 0 && !by_duration && w.getSessions() == 0) {
    p.Fail(where, "expected 'num_requests' (or 'duration_s', or 'sessions'), found none");
  }
  if (w.getWarmupS() > 0 && !by_duration) {
    p.Fail(where,
           "expected 'duration_s' with 'warmup_s' (a timed warm-up precedes a timed "
           "window), found none");
  }
  if (by_duration && (w.getPlan().size() > 0 || w.getSessions() > 0 || w.getWarmupRequests() > 0)) {
    p.Fail(where,
           "expected 'duration_s' without trace, length distributions, shared_prefix, sessions "
           "or warmup_requests (use warmup_s), found one of them");
  }
  if (w.getSessions() > 0 &&
      (w.getPlan().size() > 0 || w.getRequestRatePerS() > 0 || w.getRamp().size() > 0)) {
    p.Fail(where,
           "expected 'sessions' closed loop on synthetic prompts (no trace, length "
           "distributions, shared_prefix, request_rate or ramp), found one of them");
  }
  if (w.getTokenIdPrompts() && w.getApi() == schema::ApiKind::CHAT_COMPLETIONS) {
    p.Fail(where,
           "expected 'prompt: token_ids' with 'api: completions' (chat messages are text), "
           "found 'api: chat'");
  }
  const bool replay = w.getPlan().size() > 0 && w.getReplayArrivals();
  if (w.getConcurrency() == 0 && w.getRequestRatePerS() == 0 && !replay &&
      w.getRamp().size() == 0 && w.getSessions() == 0) {
    p.Fail(where,
           "expected 'concurrency' (closed loop) or 'request_rate' (open loop), found neither");
  }
  const auto layout = spec.getLayout();
  const auto config = spec.getEngineConfig();
  if (spec.getEngine() == "external" && config.getBaseUrl().size() == 0) {
    p.Fail(where, "expected 'engine_config.base_url' for engine: external, found none");
  }
  if (spec.getEngine() == "template" && config.getCommand().size() == 0) {
    p.Fail(where,
           "expected 'engine_config.command' (argv with {placeholders}) for engine: "
           "template, found none");
  }
  if (layout.getDpAttention() && layout.getTp() % layout.getDp() != 0) {
    p.Fail(where, fmt::format("expected dp_attention groups to split tp evenly, found tp={} dp={}",
                              layout.getTp(), layout.getDp()));
  }
  if ((layout.getPrefillInstances() == 0) != (layout.getDecodeInstances() == 0)) {
    p.Fail(where, fmt::format("expected both prefill_instances and decode_instances for a "
                              "disaggregated layout, found {} and {}",
                              layout.getPrefillInstances(), layout.getDecodeInstances()));
  }
}

// Top-level keys of the matrix itself (the rest describe runs).
const std::vector<std::string> kMatrixKeys = {"name",    "axes",    "zip",     "repeats",
                                              "local",   "probes",  "cluster", "where",
                                              "exclude", "compare", "baseline"};

// One axis of the product: the keys it sets, and for each position one value per key.
struct Axis {
  std::vector<std::string> keys;
  std::vector<std::vector<YAML::Node>> positions;
};

// `zip:` a list of groups; each group maps run keys to lists of one common length, and its
// i-th position sets every key to its i-th value (e.g. an engine with its own flags).
void ReadZipGroups(Parser& p, const YAML::Node& zip, std::vector<Axis>* axes) {
  if (!zip.IsSequence()) {
    p.Fail(zip, fmt::format("expected 'zip' to be a list of groups (mappings of keys to lists of "
                            "equal length), found {}",
                            Parser::Found(zip)));
    return;
  }
  for (const auto& group : zip) {
    if (!p.ExpectMap(group, "a zip group")) return;
    p.CheckKeys(group, "a zip group", kRunKeys);
    Axis axis;
    for (const auto& entry : group) {
      const std::string key = entry.first.Scalar();
      if (!entry.second.IsSequence() || entry.second.size() == 0) {
        p.Fail(entry.second, fmt::format("expected zip key '{}' to be a non-empty list, found {}",
                                         key, Parser::Found(entry.second)));
        return;
      }
      if (!axis.keys.empty() && entry.second.size() != axis.positions.size()) {
        p.Fail(entry.second,
               fmt::format("expected zip key '{}' to list {} values (as '{}' does), found {}", key,
                           axis.positions.size(), axis.keys[0], entry.second.size()));
        return;
      }
      if (axis.keys.empty()) axis.positions.resize(entry.second.size());
      axis.keys.push_back(key);
      for (size_t i = 0; i < entry.second.size(); ++i) axis.positions[i].push_back(entry.second[i]);
    }
    if (axis.keys.empty()) {
      p.Fail(group, "expected a zip group to name at least one key, found none");
      return;
    }
    axes->push_back(std::move(axis));
  }
}

// A parsed condition and where it was written.
struct Condition {
  std::shared_ptr<Expression> expression;
  YAML::Node node;
  std::string text;
  std::string key;
};

// `where`, `exclude` or `baseline`: one expression or a list of them.
std::vector<Condition> ReadConditions(Parser& p, const YAML::Node& root, const std::string& key) {
  std::vector<Condition> out;
  const YAML::Node node = root[key];
  if (!node) return out;
  std::vector<YAML::Node> items;
  if (node.IsSequence()) {
    for (const auto& item : node) items.push_back(item);
  } else {
    items.push_back(node);
  }
  for (const auto& item : items) {
    const std::string text = p.Text(item, key);
    if (p.failed()) return out;
    std::unique_ptr<Expression> expression;
    if (Status s = Expression::Parse(text, &expression); !s.ok()) {
      p.Fail(item, fmt::format("in '{}' expression '{}': {}", key, text, s.message()));
      return out;
    }
    out.push_back({std::shared_ptr<Expression>(std::move(expression)), item, text, key});
  }
  return out;
}

// `compare: [engine]`: the axes a comparison group varies; runs equal in every other axis form
// one group in the report.
std::vector<std::string> ReadCompareAxes(Parser& p, const YAML::Node& node,
                                         const std::vector<Axis>& axes) {
  std::vector<std::string> out;
  std::vector<std::string> known;
  for (const auto& axis : axes) known.insert(known.end(), axis.keys.begin(), axis.keys.end());
  const std::vector<YAML::Node> items = node.IsSequence()
                                            ? std::vector<YAML::Node>(node.begin(), node.end())
                                            : std::vector<YAML::Node>{node};
  for (const auto& item : items) {
    const std::string key = p.Text(item, "compare");
    if (p.failed()) return out;
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string expected;
      for (const auto& k : known) expected += (expected.empty() ? "" : ", ") + k;
      p.Fail(item, fmt::format("expected 'compare' to name an axis of this matrix ({}), found '{}'",
                               expected.empty() ? "it has none" : expected, key));
      return out;
    }
    out.push_back(key);
  }
  return out;
}

// The variables a condition may use, for one run.
VariableLookup RunVariables(schema::RunSpec::Reader spec, const LocalCluster& cluster) {
  return [spec, cluster](const std::string& name) -> std::optional<ExpressionValue> {
    const auto layout = spec.getLayout();
    const auto w = spec.getWorkload();
    const std::map<std::string, std::function<ExpressionValue()>> variables = {
        {"tp", [&] { return double(layout.getTp()); }},
        {"pp", [&] { return double(layout.getPp()); }},
        {"dp", [&] { return double(layout.getDp()); }},
        {"ep", [&] { return layout.getExpertParallel() ? 1.0 : 0.0; }},
        {"prefill_instances", [&] { return double(layout.getPrefillInstances()); }},
        {"decode_instances", [&] { return double(layout.getDecodeInstances()); }},
        {"gpus", [&] { return double(GpusForLayout(layout)); }},
        {"nodes", [&] { return double(cluster.agents); }},
        {"gpus_per_node",
         [&] {
           return double(layout.getGpusPerNode() > 0 ? layout.getGpusPerNode()
                                                     : cluster.gpus_per_agent);
         }},
        {"concurrency", [&] { return double(w.getConcurrency()); }},
        {"request_rate", [&] { return w.getRequestRatePerS(); }},
        {"input_len", [&] { return double(w.getInputLenTok()); }},
        {"output_len", [&] { return double(w.getOutputLenTok()); }},
        {"num_requests", [&] { return double(w.getNumRequests()); }},
        {"engine", [&] { return std::string(spec.getEngine()); }},
        {"engine_version", [&] { return std::string(spec.getEngineVersion()); }},
        {"model", [&] { return std::string(spec.getModel()); }},
        {"precision", [&] { return std::string(spec.getPrecision()); }},
        {"quantization", [&] { return std::string(spec.getQuantization()); }},
        {"kv_cache_dtype", [&] { return std::string(spec.getKvCacheDtype()); }},
        {"workload", [&] { return std::string(w.getName()); }},
    };
    auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second();
  };
}

const char* kVariableNames =
    "tp, pp, dp, ep, prefill_instances, decode_instances, gpus, nodes, gpus_per_node, "
    "concurrency, request_rate, input_len, output_len, num_requests, engine, engine_version, "
    "model, precision, quantization, kv_cache_dtype, workload";

bool Holds(Parser& p, const Condition& c, const VariableLookup& lookup) {
  bool holds = false;
  if (Status s = c.expression->Holds(lookup, &holds); !s.ok()) {
    p.Fail(c.node, fmt::format("in '{}' expression '{}': {}; variables: {}", c.key, c.text,
                               s.message(), kVariableNames));
  }
  return holds;
}

bool AllHold(Parser& p, const std::vector<Condition>& conditions, const VariableLookup& lookup,
             bool if_none) {
  if (conditions.empty()) return if_none;
  return std::all_of(conditions.begin(), conditions.end(),
                     [&](const Condition& c) { return Holds(p, c, lookup); });
}

bool AnyHolds(Parser& p, const std::vector<Condition>& conditions, const VariableLookup& lookup) {
  return std::any_of(conditions.begin(), conditions.end(),
                     [&](const Condition& c) { return Holds(p, c, lookup); });
}

}  // namespace

uint32_t GpusForLayout(schema::Layout::Reader layout) {
  const uint32_t per_instance = layout.getTp() * layout.getPp();
  if (layout.getPrefillInstances() > 0) {
    return (layout.getPrefillInstances() + layout.getDecodeInstances()) * per_instance;
  }
  // Data-parallel attention splits the instance's own tp GPUs; plain dp adds replicas.
  return layout.getDpAttention() ? per_instance : per_instance * layout.getDp();
}

Status ExpandMatrix(const std::string& path, const std::string& text, LoadedMatrix* out) {
  YAML::Node parsed;
  try {
    parsed = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::Error(fmt::format("{}:{}:{}: expected valid YAML, found a syntax error: {}",
                                     path, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  // Read through a const node: yaml-cpp's non-const operator[] may insert missing keys.
  const YAML::Node& root = parsed;
  Parser p(path);
  if (!p.ExpectMap(root, "the matrix")) return p.status();

  std::vector<std::string> top_keys = kRunKeys;
  top_keys.insert(top_keys.end(), kMatrixKeys.begin(), kMatrixKeys.end());
  p.CheckKeys(root, "the matrix", top_keys);
  if (p.failed()) return p.status();

  std::string name = "sweep";
  uint32_t repeats = 1;
  if (root["name"]) {
    name = p.Text(root["name"], "name");
    // The name prefixes run ids, which name spool files: keep it to file-name characters.
    const bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    if (!valid) {
      p.Fail(root["name"], fmt::format("expected 'name' of letters, digits, '.', '_' or '-', "
                                       "found '{}'",
                                       name));
    }
  }
  if (root["repeats"]) repeats = p.Uint(root["repeats"], "repeats", 1);
  if (const YAML::Node local = root["local"]) {
    if (p.ExpectMap(local, "'local'")) {
      p.CheckKeys(local, "local", {"agents", "gpus_per_agent"});
      if (local["agents"]) out->local.agents = p.Uint(local["agents"], "agents", 1);
      if (local["gpus_per_agent"]) {
        out->local.gpus_per_agent = p.Uint(local["gpus_per_agent"], "gpus_per_agent", 1);
      }
    }
  }

  bool probes_enabled = false, exclude_unhealthy = false;
  uint32_t probe_repeats = 5;
  if (const YAML::Node probes = root["probes"]) {
    if (p.ExpectMap(probes, "'probes'")) {
      p.CheckKeys(probes, "probes", {"enabled", "exclude_unhealthy", "repeats"});
      if (probes["enabled"]) probes_enabled = p.Bool(probes["enabled"], "enabled");
      if (probes["exclude_unhealthy"]) {
        exclude_unhealthy = p.Bool(probes["exclude_unhealthy"], "exclude_unhealthy");
      }
      if (probes["repeats"]) probe_repeats = p.Uint(probes["repeats"], "repeats", 1);
    }
  }

  // Axes: each a non-empty list; the runs are their cartesian product, first axis slowest.
  // A zip group is one axis whose positions set several keys together.
  std::vector<Axis> axes;
  if (const YAML::Node axes_node = root["axes"]) {
    if (p.ExpectMap(axes_node, "'axes'")) {
      p.CheckKeys(axes_node, "axes", kRunKeys);
      for (const auto& entry : axes_node) {
        if (!entry.second.IsSequence() || entry.second.size() == 0) {
          p.Fail(entry.second, fmt::format("expected axis '{}' to be a non-empty list, found {}",
                                           entry.first.Scalar(), Parser::Found(entry.second)));
          continue;
        }
        Axis axis;
        axis.keys = {entry.first.Scalar()};
        for (const auto& value : entry.second) axis.positions.push_back({value});
        axes.push_back(std::move(axis));
      }
    }
  }
  if (const YAML::Node zip = root["zip"]) ReadZipGroups(p, zip, &axes);
  LocalCluster cluster = out->local;
  if (const YAML::Node c = root["cluster"]) {
    if (p.ExpectMap(c, "'cluster'")) {
      p.CheckKeys(c, "cluster", {"nodes", "gpus_per_node"});
      if (c["nodes"]) cluster.agents = p.Uint(c["nodes"], "nodes", 1);
      if (c["gpus_per_node"])
        cluster.gpus_per_agent = p.Uint(c["gpus_per_node"], "gpus_per_node", 1);
    }
  }
  out->cluster = cluster;
  out->cluster_declared = root["cluster"] || root["local"];
  const auto keep_if = ReadConditions(p, root, "where");
  const auto drop_if = ReadConditions(p, root, "exclude");
  const auto baseline = ReadConditions(p, root, "baseline");
  std::vector<std::string> compare_axes;
  if (const YAML::Node compare = root["compare"]) {
    compare_axes = ReadCompareAxes(p, compare, axes);
  }
  if (p.failed()) return p.status();

  size_t combinations = 1;
  for (const auto& axis : axes) combinations *= axis.positions.size();
  if (combinations * repeats > 100000) {
    return Status::Error(fmt::format("{}: expected at most 100000 runs, found {} (axes x repeats)",
                                     path, combinations * repeats));
  }

  // Applies the top-level keys and one combination of axis values to `spec`; returns its label.
  auto apply = [&](size_t combo, schema::RunSpec::Builder spec) {
    for (const auto& entry : root) {
      const std::string key = entry.first.Scalar();
      if (std::find(kMatrixKeys.begin(), kMatrixKeys.end(), key) == kMatrixKeys.end()) {
        ApplyRunKey(p, key, entry.second, spec);
      }
    }
    // Decompose the combination index, last axis fastest.
    std::string label;
    size_t rest = combo;
    std::vector<size_t> choice(axes.size());
    for (size_t a = axes.size(); a-- > 0;) {
      choice[a] = rest % axes[a].positions.size();
      rest /= axes[a].positions.size();
    }
    std::string group;
    for (size_t a = 0; a < axes.size(); ++a) {
      const auto& values = axes[a].positions[choice[a]];
      for (size_t k = 0; k < axes[a].keys.size(); ++k) {
        ApplyRunKey(p, axes[a].keys[k], values[k], spec);
        const std::string part = AxisLabel(axes[a].keys[k], values[k]);
        label += (label.empty() ? "" : " ") + part;
        if (std::find(compare_axes.begin(), compare_axes.end(), axes[a].keys[k]) ==
            compare_axes.end()) {
          group += (group.empty() ? "" : " ") + part;
        }
      }
    }
    if (!compare_axes.empty()) spec.setCompareGroup(group.empty() ? "all" : group);
    return label;
  };

  // The combinations `where` keeps and `exclude` does not drop (judged before traces expand).
  std::vector<size_t> kept;
  for (size_t combo = 0; combo < combinations; ++combo) {
    capnp::MallocMessageBuilder scratch;
    auto spec = scratch.initRoot<schema::RunSpec>();
    apply(combo, spec);
    if (p.failed()) return p.status();
    const auto lookup = RunVariables(spec.asReader(), cluster);
    if (AllHold(p, keep_if, lookup, true) && !AnyHolds(p, drop_if, lookup)) kept.push_back(combo);
    if (p.failed()) return p.status();
  }
  if (kept.empty()) {
    return Status::Error(
        fmt::format("{}: expected at least one run, found none left after 'where'/'exclude' "
                    "({} combinations)",
                    path, combinations));
  }

  auto matrix = out->message.initRoot<schema::Matrix>();
  matrix.setName(name);
  matrix.setSourcePath(path);
  matrix.setSourceHash(StableHashHex(text));
  TraceCache trace_cache;
  TaskCache task_cache;
  auto probe_settings = matrix.initProbes();
  probe_settings.setEnabled(probes_enabled);
  probe_settings.setExcludeUnhealthy(exclude_unhealthy);
  probe_settings.setRepeats(probe_repeats);
  auto compare_list = matrix.initCompareAxes(static_cast<unsigned>(compare_axes.size()));
  for (size_t i = 0; i < compare_axes.size(); ++i) compare_list.set(i, compare_axes[i]);
  auto runs = matrix.initRuns(static_cast<unsigned>(kept.size() * repeats));
  out->text = text;

  for (size_t k = 0; k < kept.size(); ++k) {
    for (uint32_t repeat = 0; repeat < repeats; ++repeat) {
      const size_t index = k * repeats + repeat;
      auto spec = runs[index];
      spec.setSweepName(name);
      spec.setIndex(static_cast<uint32_t>(index));
      spec.setRepeat(repeat);
      std::string label = apply(kept[k], spec);
      if (repeats > 1) label += fmt::format(" repeat={}", repeat);
      spec.setLabel(label.empty() ? "default" : label);
      ExpandTrace(p, root, path, trace_cache, spec.getWorkload());
      ExpandLengthDistributions(p, root, path, trace_cache, spec.getWorkload());
      ExpandSharedPrefixes(p, root, spec.getWorkload());
      ExpandCustomPrompts(
          p,
          root["workload"] && root["workload"].IsMap() && root["workload"]["prompts"]
              ? root["workload"]["prompts"]
              : root,
          path, spec.getWorkload());
      if (spec.getWorkload().getSessions() > 0) {
        auto w = spec.getWorkload();
        w.setNumRequests(w.getSessions() * w.getTurns());
      }
      if (spec.hasQuality()) {
        ExpandQuality(p, root["quality"] ? root["quality"] : root, path, task_cache,
                      spec.getQuality());
      }
      if (spec.getWorkload().getName().size() == 0) {
        auto w = spec.getWorkload();
        w.setName(fmt::format("fixed-in{}-out{}", w.getInputLenTok(), w.getOutputLenTok()));
      }
      CheckRunIsRunnable(p, root, spec.asReader());
      if (p.failed()) return p.status();

      const auto layout = spec.getLayout().asReader();
      spec.setGpusNeeded(GpusForLayout(layout));
      if (layout.getGpusPerNode() > 0) {
        spec.setNodesNeeded((spec.getGpusNeeded() + layout.getGpusPerNode() - 1) /
                            layout.getGpusPerNode());
      }
      // The run id hashes the run's conditions, so an edited matrix never reuses stale results.
      capnp::MallocMessageBuilder scratch;
      scratch.setRoot(spec.asReader());
      auto words = capnp::messageToFlatArray(scratch);
      auto bytes = words.asChars();
      const std::string hash = StableHashHex(std::string_view(bytes.begin(), bytes.size()));
      spec.setRunId(fmt::format("{}-{:04}-{}", name, index, hash.substr(0, 8)));
      // Marked after the id: choosing another baseline re-runs nothing.
      if (!baseline.empty()) {
        spec.setBaseline(AllHold(p, baseline, RunVariables(spec.asReader(), cluster), true));
        if (p.failed()) return p.status();
      }
    }
  }
  bool any_baseline = false;
  for (auto run : runs) any_baseline = any_baseline || run.getBaseline();
  if (!baseline.empty() && !any_baseline) {
    return Status::Error(
        fmt::format("{}: expected 'baseline' to select at least one run, "
                    "found none",
                    path));
  }
  return Status::Ok();
}

Status LoadMatrixFile(const std::string& path, LoadedMatrix* out) {
  std::ifstream in(path);
  if (!in)
    return Status::Error(fmt::format("{}: expected a readable matrix file, found none", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ExpandMatrix(path, buffer.str(), out);
}

}  // namespace servesweep::coordinator
