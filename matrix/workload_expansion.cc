#include "matrix/workload_expansion.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <sstream>

#include "common/ids.h"
#include "perfmodel/run_deployment.h"
#include "workload/custom_prompts.h"
#include "workload/length_distribution.h"
#include "workload/prefix_hit_rate.h"

namespace servesweep::matrix {
namespace {

// Tokens per shared-prefix block (Mooncake's hash_ids cover 512-token blocks).
constexpr uint32_t kPrefixBlockTok = 512;

workload::LengthDistribution FromSchema(schema::LengthDistribution::Reader d, uint32_t fixed) {
  workload::LengthDistribution out;
  out.kind = d.getKind().size() ? std::string(d.getKind().cStr()) : "fixed";
  out.a = out.kind == "fixed" ? fixed : d.getA();
  out.b = d.getB();
  out.min = d.getMin();
  out.max = d.getMax();
  return out;
}

uint32_t RoundedMean(uint64_t sum, uint32_t n) { return static_cast<uint32_t>((sum + n / 2) / n); }

// A plan of `n` requests of the fixed lengths, unless the workload has one (sampled lengths):
// what per-request prefixes are written into.
void PlanFixedLengths(uint32_t n, schema::Workload::Builder w) {
  if (w.getPlan().size() == n) return;
  auto plan = w.initPlan(n);
  for (uint32_t i = 0; i < n; ++i) {
    plan[i].setInputLenTok(w.getInputLenTok());
    plan[i].setOutputLenTok(w.getOutputLenTok());
  }
  w.setReplayArrivals(false);
}

// The engine's prefix-cache block in tokens: a cache serves only whole blocks. 0: the engine has
// no prefix cache. vLLM: CacheConfig.DEFAULT_BLOCK_SIZE (16; vllm/config/cache.py, 0.11 and
// 0.33); SGLang's radix cache and llama.cpp's slots match token by token (--page-size 1, the
// default); the emulator: its performance model's block (perfmodel/deployment.h), and no cache
// without a model. An endpoint servesweep does not start is taken as token-granular.
uint32_t PrefixCacheBlockTok(schema::RunSpec::Reader spec) {
  const std::string_view engine = spec.getEngine().cStr();
  if (engine == "vllm") return 16;
  if (engine == "sim") {
    if (spec.getSim().getHardware().size() == 0) return 0;
    return static_cast<uint32_t>(perfmodel::DeploymentFor(spec).block_size_tok);
  }
  return 1;
}

}  // namespace

void WorkloadExpander::Expand(const YAML::Node& where, const YAML::Node& prompts_where,
                              const YAML::Node& hit_rate_where, const YAML::Node& lora_where,
                              schema::RunSpec::Builder spec) {
  auto w = spec.getWorkload();
  ExpandTrace(where, w);
  ExpandLengthDistributions(where, w);
  ExpandSharedPrefixes(where, w);
  ExpandPrefixHitRate(hit_rate_where, spec);
  ExpandLora(lora_where, spec);
  ExpandCustomPrompts(prompts_where, w);
  if (w.getSessions() > 0) w.setNumRequests(w.getSessions() * w.getTurns());
  if (spec.hasQuality()) ExpandQuality(where, spec.getQuality());
  if (w.getName().size() == 0) {
    w.setName(fmt::format("fixed-in{}-out{}", w.getInputLenTok(), w.getOutputLenTok()));
  }
}

// `workload.lora` against the adapters `engine_config.lora` serves: a choice needs them, and a
// trace's adapter names must be among them (a name no engine serves would fail every request).
void WorkloadExpander::ExpandLora(const YAML::Node& where, schema::RunSpec::Builder spec) {
  const auto w = spec.getWorkload().asReader();
  const std::string choice = w.getLoraChoice().cStr();
  const auto adapters = spec.getEngineConfig().getLoraAdapters().asReader();
  if (choice.empty() || reader_.failed()) return;
  if (adapters.size() == 0) {
    return reader_.Fail(where, fmt::format("expected engine_config.lora.adapters for 'lora: "
                                           "{{choice: {}}}' (the adapters requests choose "
                                           "among), found none",
                                           choice));
  }
  if (choice != "trace") return;
  if (w.getTrace().size() == 0) {
    return reader_.Fail(where,
                        "expected a 'trace' with an adapter per request for 'lora: "
                        "{choice: trace}', found none");
  }
  for (auto planned : w.getPlan()) {
    const std::string name = planned.getAdapter().cStr();
    if (name.empty()) continue;
    bool served = false;
    for (auto adapter : adapters) served = served || name == adapter.getName().cStr();
    if (!served) {
      return reader_.Fail(where, fmt::format("{}: expected each request's adapter among "
                                             "engine_config.lora.adapters, found '{}'",
                                             w.getTrace().cStr(), name));
    }
  }
}

const std::vector<workload::TraceRequest>* WorkloadExpander::Trace(const YAML::Node& where,
                                                                   const std::string& path,
                                                                   const std::string& format_name,
                                                                   uint32_t limit,
                                                                   workload::TraceFormat* format) {
  if (Status s = workload::ParseTraceFormat(format_name, path, format); !s.ok()) {
    reader_.Fail(where, s.message());
    return nullptr;
  }
  auto& requests = traces_[fmt::format("{}|{}|{}", path, static_cast<int>(*format),
                                       limit == 0 ? "all" : "head")];
  if (requests.empty() || (limit > 0 && requests.size() < limit)) {
    if (Status s = workload::ReadTrace(path, *format, limit, &requests); !s.ok()) {
      reader_.Fail(where, s.message());
      return nullptr;
    }
  }
  return &requests;
}

// `workload.trace` into the run's plan: the first num_requests requests of the trace, their
// arrival offsets divided by trace_speedup. The means become input/output_len (warm-up).
void WorkloadExpander::ExpandTrace(const YAML::Node& where, schema::Workload::Builder w) {
  if (w.getTrace().size() == 0 || reader_.failed()) return;
  const std::string path = w.getTrace().cStr();
  const uint32_t n = w.getNumRequests();
  if (n == 0) {
    return reader_.Fail(
        where, "expected 'num_requests' (how many of the trace's requests to replay), found none");
  }
  workload::TraceFormat format;
  const auto* requests = Trace(where, path, w.getTraceFormat().cStr(), n, &format);
  if (requests == nullptr) return;
  if (requests->size() < n) {
    return reader_.Fail(where, fmt::format("{}: expected at least {} requests (num_requests), "
                                           "found {}",
                                           path, n, requests->size()));
  }
  auto plan = w.initPlan(n);
  uint64_t input_sum = 0, output_sum = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const auto& request = (*requests)[i];
    plan[i].setOffsetNs(static_cast<int64_t>(request.offset_ns / w.getTraceSpeedup()));
    plan[i].setInputLenTok(std::max<uint32_t>(1, request.input_len_tok));
    plan[i].setOutputLenTok(std::max<uint32_t>(1, request.output_len_tok));
    if (!request.hash_ids.empty()) {
      auto blocks = plan[i].initPrefixBlocks(static_cast<unsigned>(request.hash_ids.size()));
      for (size_t b = 0; b < request.hash_ids.size(); ++b) blocks.set(b, request.hash_ids[b]);
      plan[i].setPrefixLenTok(
          std::min<uint32_t>(plan[i].getInputLenTok(),
                             static_cast<uint32_t>(request.hash_ids.size()) * kPrefixBlockTok));
    }
    if (!request.adapter.empty()) plan[i].setAdapter(request.adapter);
    input_sum += plan[i].getInputLenTok();
    output_sum += plan[i].getOutputLenTok();
  }
  w.setInputLenTok(RoundedMean(input_sum, n));
  w.setOutputLenTok(RoundedMean(output_sum, n));
  const std::filesystem::path file(path);
  w.setTrace(fmt::format("{}:{}", format == workload::TraceFormat::kAzureCsv ? "azure" : "mooncake",
                         file.filename().string()));
  if (w.getName().size() == 0) w.setName(fmt::format("trace-{}", file.stem().string()));
}

// Each request's lengths sampled into the plan when a length is not fixed (seeded by the
// workload's seed: the same matrix gives the same lengths); an empirical distribution draws from
// a trace's own lengths. The means become input/output_len.
void WorkloadExpander::ExpandLengthDistributions(const YAML::Node& where,
                                                 schema::Workload::Builder w) {
  auto in = FromSchema(w.getInputLenDistribution(), w.getInputLenTok());
  auto out = FromSchema(w.getOutputLenDistribution(), w.getOutputLenTok());
  if ((in.kind == "fixed" && out.kind == "fixed") || reader_.failed()) return;
  for (auto [dist, schema_dist, input] :
       {std::tuple{&in, w.getInputLenDistribution().asReader(), true},
        std::tuple{&out, w.getOutputLenDistribution().asReader(), false}}) {
    if (dist->kind != "empirical") continue;
    const std::string path = schema_dist.getTrace().cStr();
    workload::TraceFormat format;
    const auto* requests = Trace(where, path, schema_dist.getTraceFormat().cStr(), 0, &format);
    if (requests == nullptr) return;
    if (requests->empty()) {
      return reader_.Fail(
          where, fmt::format("{}: expected requests to draw lengths from, found none", path));
    }
    dist->source = path;
    for (const auto& r : *requests) {
      dist->values.push_back(std::max<uint32_t>(1, input ? r.input_len_tok : r.output_len_tok));
    }
  }
  if (w.getTrace().size() > 0) {
    return reader_.Fail(where, "expected either 'trace' or length distributions, found both");
  }
  if ((in.kind == "fixed" && in.a == 0) || (out.kind == "fixed" && out.a == 0)) {
    return reader_.Fail(
        where,
        "expected both 'input_len' and 'output_len' (a number or a distribution), found one");
  }
  const uint32_t n = w.getNumRequests();
  if (n == 0) return;  // the load settings' check says what is missing
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
  w.setInputLenTok(RoundedMean(input_sum, n));
  w.setOutputLenTok(RoundedMean(output_sum, n));
  if (w.getName().size() == 0) {
    w.setName(fmt::format("dist-in{}-out{}", w.getInputLenTok(), w.getOutputLenTok()));
  }
}

// Shared-prefix groups into the plan: request i's first prefix_len tokens are group
// (i mod groups)'s, as block ids that hash the group and the block; a plan is made when the
// lengths are fixed.
void WorkloadExpander::ExpandSharedPrefixes(const YAML::Node& where, schema::Workload::Builder w) {
  const uint32_t groups = w.getSharedPrefixGroups();
  if (groups == 0 || reader_.failed()) return;
  if (w.getTrace().size() > 0) {
    return reader_.Fail(
        where, "expected either 'trace' (its own shared prefixes) or 'shared_prefix', found both");
  }
  const uint32_t n = w.getNumRequests();
  if (n == 0) return;  // the load settings' check says what is missing
  PlanFixedLengths(n, w);
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

// `prefix_hit_rate: R` into one shared prefix per request (workload/prefix_hit_rate.h): the
// plan's first prefix blocks are one group's, their length R of each prompt in whole cache
// blocks of the engine; refused where the cache cannot serve it or the warm-up cannot prime it.
void WorkloadExpander::ExpandPrefixHitRate(const YAML::Node& where, schema::RunSpec::Builder spec) {
  auto w = spec.getWorkload();
  const double rate = w.getPrefixHitRate();
  if (rate < 0 || reader_.failed()) return;
  const char* other = w.getTrace().size() > 0         ? "trace"
                      : w.getSharedPrefixGroups() > 0 ? "shared_prefix"
                      : w.getSessions() > 0           ? "sessions"
                      : w.getPrompts().size() > 0     ? "prompts"
                      : w.getDurationS() > 0          ? "duration_s"
                                                      : nullptr;
  if (other != nullptr) {
    return reader_.Fail(where, fmt::format("expected 'prefix_hit_rate' without '{}' (it sets "
                                           "every prompt's shared prefix itself), found both",
                                           other));
  }
  if (spec.getEngineConfig().getPrefixCaching() == schema::EngineConfig::Toggle::OFF) {
    return reader_.Fail(where,
                        "expected the prefix cache on for 'prefix_hit_rate', found "
                        "engine_config.prefix_caching: off");
  }
  const uint32_t block_tok = PrefixCacheBlockTok(spec.asReader());
  if (block_tok == 0) {
    return reader_.Fail(
        where, fmt::format("expected an engine with a prefix cache for 'prefix_hit_rate', found "
                           "engine '{}' without one (the emulator has one with a performance "
                           "model: sim.hardware)",
                           spec.getEngine().cStr()));
  }
  if (w.getWarmupRequests() == 0) {
    return reader_.Fail(where,
                        "expected 'warmup_requests' >= 1 with 'prefix_hit_rate': the "
                        "warm-up sends the shared prefix first, so the measured requests "
                        "find it cached; found 0");
  }
  const uint32_t n = w.getNumRequests();
  if (n == 0) return;  // the load settings' check says what is missing
  PlanFixedLengths(n, w);
  auto plan = w.getPlan();
  std::vector<uint32_t> inputs;
  for (auto p : plan) inputs.push_back(p.getInputLenTok());
  workload::SharedPrefixPlan prefixes;
  if (Status s = workload::PlanSharedPrefix(rate, block_tok, inputs, &prefixes); !s.ok()) {
    return reader_.Fail(where, fmt::format("{} (engine '{}'; input_len {})", s.message(),
                                           spec.getEngine().cStr(), w.getInputLenTok()));
  }
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t shared = prefixes.prefix_len_tok[i];
    const uint32_t blocks = (shared + kPrefixBlockTok - 1) / kPrefixBlockTok;
    auto ids = plan[i].initPrefixBlocks(blocks);
    for (uint32_t b = 0; b < blocks; ++b) {
      ids.set(b, StableHash64(fmt::format("prefix-hit-rate/{}/{}", w.getSeed(), b)));
    }
    plan[i].setPrefixLenTok(shared);
  }
}

// `prompts: jsonl:<file>` into the spec's custom prompts; a bad line is reported at the
// matrix's place with the file's own line.
void WorkloadExpander::ExpandCustomPrompts(const YAML::Node& where, schema::Workload::Builder w) {
  if (w.getPrompts().size() == 0 || reader_.failed()) return;
  std::string path;
  if (!workload::ParsePromptsSpec(w.getPrompts().cStr(), &path)) {
    return reader_.Fail(
        where, fmt::format("expected 'prompts: jsonl:<file>', found '{}'", w.getPrompts().cStr()));
  }
  std::vector<workload::CustomPromptLine> lines;
  if (Status s = workload::ReadCustomPrompts(path, &lines); !s.ok()) {
    return reader_.Fail(where, s.message());
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

// `quality.task_set` into the run spec's tasks (generated arithmetic, or the JSONL file), so
// agents need no file. taskSet becomes "arithmetic" or "jsonl:<file name>".
void WorkloadExpander::ExpandQuality(const YAML::Node& where, schema::QualitySettings::Builder q) {
  if (q.getTaskSet().size() == 0 || q.getTasks().size() > 0 || reader_.failed()) return;
  const std::string source = q.getTaskSet().cStr();
  std::string key, label;
  if (source == "arithmetic") {
    key = fmt::format("arithmetic|{}|{}", q.getCount(), q.getSeed());
    label = "arithmetic";
  } else {
    const std::filesystem::path path(source);
    if (path.extension() != ".jsonl") {
      return reader_.Fail(where, fmt::format("expected 'quality.task_set' to be 'arithmetic' or a "
                                             ".jsonl file of {{\"prompt\", \"answer\"}} lines, "
                                             "found '{}'",
                                             path.filename().string()));
    }
    key = fmt::format("jsonl|{}|{}", source, q.getCount());
    label = "jsonl:" + path.filename().string();
  }
  auto it = task_sets_.find(key);
  if (it == task_sets_.end()) {
    std::vector<workload::QualityTask> tasks;
    if (source == "arithmetic") {
      tasks = workload::GenerateArithmeticTasks(q.getCount(), q.getSeed());
    } else if (Status s = workload::LoadTaskJsonl(source, q.getCount(), &tasks); !s.ok()) {
      return reader_.Fail(where, s.message());
    }
    it = task_sets_.emplace(key, std::move(tasks)).first;
  }
  auto list = q.initTasks(static_cast<unsigned>(it->second.size()));
  for (size_t i = 0; i < it->second.size(); ++i) {
    list[i].setPrompt(it->second[i].prompt);
    list[i].setAnswer(it->second[i].answer);
  }
  q.setTaskSet(label);
  q.setCount(static_cast<uint32_t>(it->second.size()));
}

}  // namespace servesweep::matrix
