#include "workload/load_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

namespace servesweep::workload {
namespace {

// The first broken rule: its matrix key and what was expected and found.
struct Broken {
  std::string key;
  std::string message;
};

std::optional<Broken> FirstBrokenRule(const LoadSettings& s) {
  const bool by_duration = s.duration_s > 0;
  const bool sessions = s.sessions > 0;
  const bool ramp = s.ramp != RampKind::kNone;
  const bool replay = !s.plan.empty() && s.replay_arrivals && s.request_rate_per_s == 0 && !ramp;
  if (s.base_url.empty()) return Broken{"base_url", "expected the server's URL, found none"};
  if (s.input_len_tok == 0) {
    return Broken{"input_len", "expected 'input_len' (tokens per prompt) >= 1, found none"};
  }
  if (s.output_len_tok == 0) {
    return Broken{"output_len", "expected 'output_len' (tokens per response) >= 1, found none"};
  }
  if (s.num_requests == 0 && !by_duration && !sessions) {
    return Broken{"num_requests",
                  "expected 'num_requests' (or 'duration_s', or 'sessions'), found none"};
  }
  if (std::isnan(s.request_rate_per_s) || s.request_rate_per_s < 0) {
    return Broken{"request_rate", fmt::format("expected 'request_rate' >= 0 (0 = closed loop), "
                                              "found {}",
                                              s.request_rate_per_s)};
  }
  if (ramp && !(s.ramp_start_rate_per_s > 0 && s.ramp_end_rate_per_s > 0 &&
                std::isfinite(s.ramp_start_rate_per_s) && std::isfinite(s.ramp_end_rate_per_s))) {
    return Broken{"ramp", fmt::format("expected 'ramp' start_rate and end_rate finite and > 0, "
                                      "found {} and {}",
                                      s.ramp_start_rate_per_s, s.ramp_end_rate_per_s)};
  }
  const bool open_loop = IsOpenLoop(s);
  if (!open_loop && s.concurrency == 0 && !sessions) {
    return Broken{"concurrency",
                  "expected 'concurrency' (closed loop) or 'request_rate' (open loop), found "
                  "neither"};
  }
  if (open_loop && s.concurrency > 0) {
    return Broken{"concurrency",
                  fmt::format("expected 'max_in_flight' to cap an open loop's requests in flight "
                              "({}), found 'concurrency: {}', which is a closed loop's slots; the "
                              "warm-up's slots are 'warmup_concurrency'",
                              replay ? "trace replay"
                              : ramp ? "a ramp"
                                     : "request_rate",
                              s.concurrency)};
  }
  if (!open_loop && s.max_in_flight > 0) {
    return Broken{"max_in_flight",
                  fmt::format("expected 'max_in_flight' only with an open loop (request_rate, "
                              "ramp or trace replay), found it with a closed loop of {}",
                              sessions ? "sessions" : "'concurrency' slots")};
  }
  if (!(s.request_timeout_s > 0)) {
    return Broken{"timeout_s",
                  fmt::format("expected 'timeout_s' > 0 seconds, found {}", s.request_timeout_s)};
  }
  if (s.threads == 0 || s.threads > 64) {
    return Broken{"client_threads",
                  fmt::format("expected 'client_threads' from 1 to 64, found {}", s.threads)};
  }
  if (!(s.burstiness > 0)) {
    return Broken{"burstiness",
                  fmt::format("expected 'burstiness' > 0 (1 = Poisson), found {}", s.burstiness)};
  }
  if (std::isnan(s.warmup_s) || s.warmup_s < 0 || !std::isfinite(s.warmup_s)) {
    return Broken{"warmup_s",
                  fmt::format("expected 'warmup_s' finite and >= 0, found {}", s.warmup_s)};
  }
  if (std::isnan(s.duration_s) || s.duration_s < 0 || !std::isfinite(s.duration_s)) {
    return Broken{"duration_s",
                  fmt::format("expected 'duration_s' finite and >= 0, found {}", s.duration_s)};
  }
  if (s.warmup_s > 0 && !by_duration) {
    return Broken{"warmup_s",
                  "expected 'duration_s' with 'warmup_s' (a timed warm-up precedes a timed "
                  "window), found none"};
  }
  if (by_duration && std::isinf(s.request_rate_per_s)) {
    return Broken{"duration_s",
                  "expected a finite 'request_rate' with 'duration_s' (inf would send without "
                  "end), found inf"};
  }
  if (std::isnan(s.drain_timeout_s) || s.drain_timeout_s < 0) {
    return Broken{"drain_timeout_s",
                  fmt::format("expected 'drain_timeout_s' >= 0 (0 = wait for every request), "
                              "found {}",
                              s.drain_timeout_s)};
  }
  if (s.early_stop.enabled()) {
    const EarlyStopSettings& e = s.early_stop;
    if (!(e.tolerance_pct > 0 && e.tolerance_pct < 100)) {
      return Broken{"early_stop", fmt::format("expected 'early_stop.stable.tolerance_pct' in "
                                              "(0, 100), found {}",
                                              e.tolerance_pct)};
    }
    if (e.windows < 2 || e.window_requests < 4) {
      return Broken{"early_stop",
                    fmt::format("expected 'early_stop.stable' windows >= 2 of window_requests >= "
                                "4 (a percentile needs a few requests), found {} of {}",
                                e.windows, e.window_requests)};
    }
    if (!(e.min_s >= 0 && std::isfinite(e.min_s)) ||
        !(e.window_s > 0 && std::isfinite(e.window_s))) {
      return Broken{"early_stop",
                    fmt::format("expected 'early_stop.oversaturated' min_s >= 0 and window_s > 0 "
                                "seconds, found {} and {}",
                                e.min_s, e.window_s)};
    }
    if (!(e.min_growth > 0 && std::isfinite(e.min_growth))) {
      return Broken{"early_stop", fmt::format("expected 'early_stop.oversaturated.min_growth' "
                                              "> 0, found {}",
                                              e.min_growth)};
    }
    if (!(e.max_duration_s >= 0 && std::isfinite(e.max_duration_s))) {
      return Broken{"early_stop", fmt::format("expected 'early_stop.max_duration_s' >= 0 "
                                              "seconds (0 = none), found {}",
                                              e.max_duration_s)};
    }
    if (sessions) {
      return Broken{"early_stop",
                    "expected 'early_stop' without 'sessions' (a conversation cut short is not "
                    "the workload asked for), found both"};
    }
  }
  if (by_duration && (!s.plan.empty() || sessions || s.warmup_requests > 0)) {
    return Broken{"duration_s",
                  "expected 'duration_s' without trace, length distributions, shared_prefix, "
                  "sessions or warmup_requests (use warmup_s), found one of them"};
  }
  if (sessions) {
    if (s.turns == 0) return Broken{"sessions", "expected 'sessions.turns' >= 1, found 0"};
    if (!s.plan.empty() || !s.custom_prompts.empty() || s.token_id_prompts ||
        s.request_rate_per_s > 0 || ramp) {
      return Broken{"sessions",
                    fmt::format("expected 'sessions' closed loop on synthetic text prompts (no "
                                "trace, length distributions, shared_prefix, prompts, 'prompt: "
                                "token_ids', request_rate or ramp), found {}",
                                !s.plan.empty()             ? "a planned workload"
                                : !s.custom_prompts.empty() ? "'prompts'"
                                : s.token_id_prompts        ? "'prompt: token_ids'"
                                : ramp                      ? "'ramp'"
                                                            : "'request_rate'")};
    }
    if (std::isnan(s.think_time_s) || s.think_time_s < 0) {
      return Broken{"sessions",
                    fmt::format("expected 'sessions.think_time_s' >= 0, found {}", s.think_time_s)};
    }
  }
  if (s.token_id_prompts && s.api == Api::kChatCompletions) {
    return Broken{"prompt",
                  "expected 'prompt: token_ids' with 'api: completions' (chat messages are "
                  "text), found 'api: chat'"};
  }
  if (!s.custom_prompts.empty() && (!s.plan.empty() || s.token_id_prompts)) {
    return Broken{"prompts",
                  "expected 'prompts' alone: it takes no trace, length distributions, shared "
                  "prefix, sessions or 'prompt: token_ids'"};
  }
  if (!s.plan.empty()) {
    if (s.plan.size() != s.num_requests) {
      return Broken{"num_requests",
                    fmt::format("expected a plan of num_requests ({}) requests, found {}",
                                s.num_requests, s.plan.size())};
    }
    for (size_t i = 0; i < s.plan.size(); ++i) {
      const auto& p = s.plan[i];
      if (p.input_len_tok == 0 || p.output_len_tok == 0 || p.offset_ns < 0) {
        return Broken{"trace",
                      fmt::format("expected planned request {} to have lengths >= 1 and an "
                                  "offset >= 0, found {}, {} and {} ns",
                                  i, p.input_len_tok, p.output_len_tok, p.offset_ns)};
      }
    }
  }
  for (size_t i = 0; i < s.custom_prompts.size(); ++i) {
    const auto& prompt = s.custom_prompts[i];
    if (prompt.messages_json.empty()) continue;
    const auto messages = nlohmann::json::parse(prompt.messages_json, nullptr, false);
    if (!messages.is_array() || messages.empty()) {
      return Broken{"prompts", fmt::format("expected custom prompt {}'s messages to be a "
                                           "non-empty JSON array, found {}",
                                           i, prompt.messages_json.substr(0, 80))};
    }
  }
  return std::nullopt;
}

}  // namespace

Status ValidateLoadSettings(const LoadSettings& settings, std::string* key) {
  const auto broken = FirstBrokenRule(settings);
  if (!broken) return Status::Ok();
  if (key != nullptr) *key = broken->key;
  return Status::InvalidArgument(broken->message);
}

LoadSettings LoadSettingsFor(schema::RunSpec::Reader spec, const std::string& base_url) {
  const auto w = spec.getWorkload();
  LoadSettings settings;
  settings.base_url = base_url;
  settings.api =
      w.getApi() == schema::ApiKind::CHAT_COMPLETIONS ? Api::kChatCompletions : Api::kCompletions;
  settings.model = spec.getModel();
  settings.num_requests = w.getNumRequests();
  settings.warmup_requests = w.getWarmupRequests();
  settings.input_len_tok = w.getInputLenTok();
  settings.output_len_tok = w.getOutputLenTok();
  settings.concurrency = w.getConcurrency();
  settings.max_in_flight = w.getMaxInFlight();
  settings.warmup_concurrency = w.getWarmupConcurrency();
  settings.threads = std::max<uint32_t>(1, w.getClientThreads());
  settings.request_rate_per_s = w.getRequestRatePerS();
  settings.seed = w.getSeed();
  settings.ignore_eos = w.getIgnoreEos();
  settings.temperature = w.getTemperature();
  settings.request_timeout_s = spec.getTimeoutS();
  settings.replay_arrivals = w.getReplayArrivals();
  settings.burstiness = w.getBurstiness();
  settings.token_id_prompts = w.getTokenIdPrompts();
  settings.arrival = w.getArrival() == "constant" ? ArrivalKind::kConstant : ArrivalKind::kPoisson;
  settings.ramp = w.getRamp() == "linear"        ? RampKind::kLinear
                  : w.getRamp() == "exponential" ? RampKind::kExponential
                                                 : RampKind::kNone;
  settings.ramp_start_rate_per_s = w.getRampStartRatePerS();
  settings.ramp_end_rate_per_s = w.getRampEndRatePerS();
  settings.warmup_s = w.getWarmupS();
  settings.duration_s = w.getDurationS();
  settings.drain_timeout_s = w.getDrainTimeoutS();
  settings.sessions = w.getSessions();
  settings.turns = w.getTurns();
  settings.think_time_s = w.getThinkTimeS();
  settings.think_time_exponential = w.getThinkTimeExponential();
  const auto stop = w.getEarlyStop();
  settings.early_stop.stable = stop.getStable();
  settings.early_stop.tolerance_pct = stop.getTolerancePct();
  settings.early_stop.windows = stop.getWindows();
  settings.early_stop.window_requests = stop.getWindowRequests();
  settings.early_stop.min_requests = stop.getMinRequests();
  settings.early_stop.oversaturated = stop.getOversaturated();
  settings.early_stop.min_s = stop.getMinS();
  settings.early_stop.window_s = stop.getWindowS();
  settings.early_stop.min_growth = stop.getMinGrowth();
  settings.early_stop.max_duration_s = stop.getMaxDurationS();
  for (auto prompt : w.getCustomPrompts()) {
    settings.custom_prompts.push_back(
        {prompt.getPrompt(), prompt.getMessagesJson(), prompt.getMaxTokens()});
  }
  settings.warmup_primes_prefix = w.getPrefixHitRate() >= 0;
  settings.adapters = AdapterRequestsFor(spec);
  const std::string choice = w.getLoraChoice().cStr();
  settings.adapters_from_plan = choice == "trace";
  if (!choice.empty() && choice != "trace") {
    // The matrix loader refused a bad choice already; what is left cannot fail.
    (void)AdapterCumulativeWeights(choice, w.getLoraZipfSkew(), settings.adapters.size(),
                                   &settings.adapter_cumulative);
  }
  for (auto planned : w.getPlan()) {
    PlannedRequest request;
    request.offset_ns = planned.getOffsetNs();
    request.input_len_tok = planned.getInputLenTok();
    request.output_len_tok = planned.getOutputLenTok();
    request.prefix_len_tok = planned.getPrefixLenTok();
    for (uint64_t block : planned.getPrefixBlocks()) request.prefix_blocks.push_back(block);
    for (size_t k = 0; k < settings.adapters.size() && planned.getAdapter().size() > 0; ++k) {
      if (settings.adapters[k].name == planned.getAdapter().cStr()) {
        request.adapter = static_cast<int32_t>(k);
      }
    }
    settings.plan.push_back(std::move(request));
  }
  return settings;
}

bool IsOpenLoop(const LoadSettings& s) {
  const bool ramp = s.ramp != RampKind::kNone;
  return s.request_rate_per_s > 0 || ramp || (!s.plan.empty() && s.replay_arrivals);
}

int32_t AdapterOf(const LoadSettings& s, uint32_t i) {
  if (s.adapters_from_plan) return i < s.plan.size() ? s.plan[i].adapter : -1;
  return PickAdapter(s.seed, i, s.adapter_cumulative);
}

uint32_t WarmupConcurrency(const LoadSettings& s) {
  if (s.warmup_concurrency > 0) return s.warmup_concurrency;
  if (s.concurrency > 0) return s.concurrency;
  if (s.max_in_flight > 0) return s.max_in_flight;
  return std::max<uint32_t>(1, s.warmup_requests);
}

LoadSettings WarmupLoadSettings(const LoadSettings& s) {
  LoadSettings warmup = s;
  warmup.num_requests = s.warmup_requests;
  warmup.warmup_requests = 0;
  warmup.concurrency = WarmupConcurrency(s);
  warmup.max_in_flight = 0;
  warmup.request_rate_per_s = 0;
  warmup.ramp = RampKind::kNone;
  warmup.plan.clear();                // the mean lengths
  warmup.adapters_from_plan = false;  // without the plan, the base model (or the weights)
  if (s.warmup_primes_prefix && !s.plan.empty() && s.warmup_requests > 0) {
    const auto longest = std::max_element(
        s.plan.begin(), s.plan.end(),
        [](const auto& a, const auto& b) { return a.prefix_len_tok < b.prefix_len_tok; });
    PlannedRequest primer = *longest;
    primer.offset_ns = 0;
    warmup.plan.assign(s.warmup_requests, primer);
    warmup.replay_arrivals = false;
  }
  warmup.sessions = 0;  // single synthetic prompts, whatever the measured phase sends
  warmup.custom_prompts.clear();
  warmup.warmup_s = warmup.duration_s = 0;
  warmup.drain_timeout_s = 0;
  warmup.early_stop = {};                        // a warm-up runs its length: it is not measured
  warmup.seed = s.seed ^ 0x5eed5eed5eed5eedULL;  // prompts unlike the measured ones
  return warmup;
}

double RampSecondsForCount(RampKind ramp, double start_rate_per_s, double end_rate_per_s,
                           uint32_t count) {
  const double n = count, r0 = start_rate_per_s, r1 = end_rate_per_s;
  if (ramp == RampKind::kLinear) return 2 * n / (r0 + r1);
  const double k = r1 / r0;
  if (std::abs(std::log(k)) < 1e-12) return n / r0;
  return n * std::log(k) / (r0 * (k - 1));
}

ArrivalKind ArrivalKindFor(const LoadSettings& s) {
  if (s.arrival == ArrivalKind::kConstant) return ArrivalKind::kConstant;
  return s.burstiness == 1.0 ? ArrivalKind::kPoisson : ArrivalKind::kGamma;
}

RateProfile RateProfileFor(const LoadSettings& s, uint32_t count) {
  RateProfile p;
  p.ramp = s.ramp;
  p.rate_per_s = s.request_rate_per_s;
  if (s.ramp == RampKind::kNone) return p;
  p.start_rate_per_s = s.ramp_start_rate_per_s;
  p.end_rate_per_s = s.ramp_end_rate_per_s;
  if (s.duration_s > 0) {
    p.ramp_start_s = s.warmup_s;
    p.ramp_s = s.duration_s;
  } else {
    p.ramp_s = RampSecondsForCount(s.ramp, p.start_rate_per_s, p.end_rate_per_s, count);
  }
  return p;
}

}  // namespace servesweep::workload
