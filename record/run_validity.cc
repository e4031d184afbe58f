#include "record/run_validity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "scraper/engine_signals.h"
#include "workload/prefix_hit_rate.h"

namespace servesweep::record {
namespace {

// Tolerances (docs/metrics.md#certified-runs). Requests: exact, but a request cut off by the
// drain timeout may still be counted (or not) by the engine after the last scrape. Tokens: 1% or
// 16 tokens, whichever is more: engines count a request's tokens when it finishes, and a
// cancelled request's tokens may land on either side of the last scrape.
constexpr double kTokenTolerance = 0.01;
constexpr int64_t kTokenToleranceFloor = 16;

int64_t Delta(const std::map<std::string, double>& before,
              const std::map<std::string, double>& after, const std::string& signal) {
  auto b = before.find(signal), a = after.find(signal);
  if (b == before.end() || a == after.end()) return -1;
  return std::llround(a->second - b->second);
}

CounterCheck Check(const std::string& name, const std::string& signal, int64_t client,
                   int64_t tolerance, const ValidityInputs& in, const std::string& no_usage) {
  CounterCheck c;
  c.name = name;
  c.client = client;
  c.tolerance = tolerance;
  c.engine = Delta(in.before, in.after, signal);
  if (c.engine < 0) {
    c.why_unchecked = fmt::format("{}: the engine exposes no counter", name);
  } else if (!no_usage.empty()) {
    c.why_unchecked = fmt::format("{}: {}", name, no_usage);
  }
  return c;
}

}  // namespace

std::string Validity::Reasons() const {
  std::string out;
  for (const auto& r : reasons) out += (out.empty() ? "" : "; ") + r;
  return out;
}

uint32_t CountEngineRestarts(const std::map<std::string, double>& before,
                             const std::vector<scraper::ScrapedSample>& during,
                             const std::map<std::string, double>& after) {
  // Each signal's values in time order: before, during, after.
  std::map<std::string, std::vector<double>> series;
  for (const auto& [signal, value] : before) series[signal].push_back(value);
  for (const auto& sample : during) series[sample.signal].push_back(sample.value);
  for (const auto& [signal, value] : after) series[signal].push_back(value);
  uint32_t restarts = 0;
  for (const auto& [signal, values] : series) {
    uint32_t seen = 0;
    for (size_t i = 1; i < values.size(); ++i) {
      const bool moved = signal == "process_start_time" ? values[i] != values[i - 1]
                         : scraper::KindOf(signal) == scraper::SignalKind::kCounter
                             ? values[i] < values[i - 1]
                             : false;
      if (moved) ++seen;
    }
    restarts = std::max(restarts, seen);  // one restart resets every counter at once
  }
  return restarts;
}

Validity JudgeValidity(const ValidityInputs& in) {
  Validity v;
  // The client's side: requests the engine accepted (a streamed 200), their tokens as the
  // server's usage reported them.
  int64_t requests = 0, prompt_tok = 0, generation_tok = 0, cancelled = 0;
  uint32_t without_usage = 0;
  for (const loadgen::RequestRecord* r : in.requests) {
    if (r->http_status != 200) continue;
    ++requests;
    prompt_tok += r->prompt_tokens;
    generation_tok += r->output_tokens;
    if (r->cancelled) ++cancelled;
    if (!r->output_tokens_from_usage && !r->cancelled) ++without_usage;
  }
  const std::string no_usage =
      without_usage > 0
          ? fmt::format(
                "the server sent no usage for {} request(s), so the client's count is "
                "its own",
                without_usage)
          : "";
  auto token_tolerance = [](int64_t client) {
    return std::max<int64_t>(kTokenToleranceFloor,
                             std::llround(kTokenTolerance * static_cast<double>(client)));
  };
  v.counters.push_back(Check("requests", "requests_finished", requests, cancelled, in, ""));
  v.counters.push_back(Check("prompt tokens", "prompt_tokens", prompt_tok,
                             token_tolerance(prompt_tok), in, no_usage));
  v.counters.push_back(Check("generation tokens", "generation_tokens", generation_tok,
                             token_tolerance(generation_tok), in, no_usage));
  v.engine_restarts = CountEngineRestarts(in.before, in.during, in.after);

  const double success_rate =
      in.measured > 0 ? static_cast<double>(in.completed) / in.measured : 0.0;
  if (in.measured == 0) {
    // Nothing to rate: say why rather than "0.0% (0 of 0)".
    v.reasons.push_back(
        "no request was measured: the measured phase (duration_s or num_requests) ended before "
        "a request did; lengthen it");
  } else if (in.measured_output_tok == 0) {
    v.reasons.push_back("no output tokens: the measured requests generated nothing");
  }
  if (in.measured > 0 && success_rate < in.min_success_rate) {
    v.reasons.push_back(fmt::format("success rate {:.1f}% ({} of {}) below min_success_rate {:g}%",
                                    100 * success_rate, in.completed, in.measured,
                                    100 * in.min_success_rate));
  }
  if (v.engine_restarts > 0) {
    v.reasons.push_back(fmt::format(
        "the engine restarted during the run ({} time(s): its counters went back or its start "
        "time moved)",
        v.engine_restarts));
  }
  std::string hit_rate_unverified;
  if (in.prefix_hit_rate_target >= 0) {
    std::map<std::string, std::vector<double>> series;
    for (const auto& sample : in.during) series[sample.signal].push_back(sample.value);
    const double hits = scraper::ReduceSignal("prefix_cache_hits", series["prefix_cache_hits"]);
    const double queries =
        scraper::ReduceSignal("prefix_cache_queries", series["prefix_cache_queries"]);
    if (std::isnan(hits) || std::isnan(queries)) {
      hit_rate_unverified = fmt::format(
          "prefix-cache hit rate set to {:.1f}%, not verified: the engine exposes no prefix-cache "
          "counter",
          100 * in.prefix_hit_rate_target);
    } else if (queries <= 0) {
      hit_rate_unverified = fmt::format(
          "prefix-cache hit rate set to {:.1f}%, not verified: the engine counted no prompt "
          "token looked up in the measured phase",
          100 * in.prefix_hit_rate_target);
    } else {
      v.prefix_hit_rate = hits / queries;
      if (std::abs(v.prefix_hit_rate - in.prefix_hit_rate_target) >
          workload::kPrefixHitRateTolerance) {
        v.reasons.push_back(fmt::format(
            "prefix-cache hit rate {:.1f}% ({:.0f} of {:.0f} prompt tokens) measured, {:.1f}% set: "
            "more than {:g} points off",
            100 * v.prefix_hit_rate, hits, queries, 100 * in.prefix_hit_rate_target,
            100 * workload::kPrefixHitRateTolerance));
      }
    }
  }
  for (const auto& c : v.counters) {
    if (c.agrees()) continue;
    v.reasons.push_back(fmt::format("{}: the client counted {}, the engine {} (tolerance {})",
                                    c.name, c.client, c.engine, c.tolerance));
  }
  if (!v.reasons.empty()) {
    v.verdict = schema::Validity::INVALID;
    return v;
  }
  const bool any_checked =
      std::any_of(v.counters.begin(), v.counters.end(), [](const auto& c) { return c.checked(); });
  if (!any_checked || !hit_rate_unverified.empty()) {
    v.verdict = schema::Validity::NOT_RECONCILED;
    if (!any_checked) {
      for (const auto& c : v.counters) v.reasons.push_back(c.why_unchecked);
    }
    if (!hit_rate_unverified.empty()) v.reasons.push_back(hit_rate_unverified);
    return v;
  }
  v.verdict = schema::Validity::VALID;
  return v;
}

}  // namespace servesweep::record
