// What the load generator is asked to do: the requests of a run (lengths, prompts, a plan) and
// how they are sent (closed or open loop, ramps, a timed window, sessions), plus how the server
// is reached. A plain struct with unit-suffixed names, its validation and its mapping from a run
// spec, in a library with no network code: the matrix loader (`plan`), `bench` and the load
// generator all call ValidateLoadSettings, so what `plan` accepts is exactly what a run can do.
//
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "schema/run_spec.capnp.h"
#include "workload/lora_choice.h"

namespace servesweep::workload {

// Open-loop gap shape: kPoisson (exponential gaps), kGamma (gamma gaps of shape `burstiness`, the
// mean gap unchanged) or kConstant (every gap one mean gap). loadgen/arrival_schedule.h.
enum class ArrivalKind { kPoisson, kGamma, kConstant };
enum class RampKind { kNone, kLinear, kExponential };

enum class Api { kCompletions, kChatCompletions };

// One request of a planned workload (trace replay): when it arrives, relative to the start of
// the measured phase, and its lengths.
struct PlannedRequest {
  int64_t offset_ns = 0;
  uint32_t input_len_tok = 0;
  uint32_t output_len_tok = 0;
  // Shared prefix: the first prefix_len_tok prompt tokens come from these block ids (512
  // tokens each), so requests with equal leading ids share those tokens.
  std::vector<uint64_t> prefix_blocks;
  uint32_t prefix_len_tok = 0;
  int32_t adapter = -1;  // a trace's LoRA adapter (index into LoadSettings::adapters); -1: base
};

// A prompt given by the user (`prompts: jsonl:<file>`, workload/custom_prompts.h): either a
// completions prompt text or a chat messages array (JSON text), and optionally its own
// max_tokens (0 = the run's output length).
struct CustomPrompt {
  std::string prompt;
  std::string messages_json;  // non-empty: a JSON array of {"role", "content"} messages
  uint32_t max_tokens = 0;
};

// Ending the measured phase before its full length (docs/matrix.md#early-stop), judged by the
// load generator from the requests it completes (loadgen/early_stop.h):
// - stable: the last `windows` windows of `window_requests` successful completions each agree
//   within tolerance_pct on output tok/s (by Little's law), TTFT p50 and p90, and TPOT p50
//   (latencies within 1 ms always agree), once max(min_requests, windows x window_requests)
//   measured requests have succeeded;
// - oversaturated: after min_s measured seconds, the delay from a request's due time to its first
//   token grows with time over the last window_s seconds, significantly (one-sided 95%) and by at
//   least min_growth seconds per second (arrivals outrunning completions by that fraction: 0.1
//   is rho >= 1.1); an open loop without a cap must also show its requests in flight growing by
//   min_growth per completion (its queue keeps growing);
// - max_duration_s (> 0): the phase ends then whatever the figures say.
// Off by default: a run measures its full length.
struct EarlyStopSettings {
  bool stable = false;
  double tolerance_pct = 5;
  uint32_t windows = 3;
  uint32_t window_requests = 32;
  uint32_t min_requests = 0;  // 0: windows x window_requests
  bool oversaturated = false;
  double min_s = 10;
  double window_s = 30;
  double min_growth = 0.1;
  double max_duration_s = 0;

  bool enabled() const { return stable || oversaturated || max_duration_s > 0; }
};

struct LoadSettings {
  std::string base_url;  // e.g. "http://127.0.0.1:8000" (no trailing /v1)
  Api api = Api::kCompletions;
  std::string model;
  std::string api_key;           // sent as a bearer token; never logged
  uint32_t num_requests = 100;   // measured requests
  uint32_t warmup_requests = 0;  // sent first, at the same concurrency, and not measured
  uint32_t input_len_tok = 128;
  uint32_t output_len_tok = 128;
  // Closed loop when request_rate_per_s == 0, a ramp and trace replay are off: `concurrency`
  // slots (> 0). An open loop (a rate, a ramp, trace replay: arrivals on an absolute schedule)
  // has no slots; `max_in_flight` > 0 caps its requests in flight (the client queues the rest,
  // recorded as client queue time). Each is refused where it does not apply.
  uint32_t concurrency = 1;
  uint32_t max_in_flight = 0;
  // The warm-up's slots (warm-up is always a closed loop): 0 = WarmupConcurrency's default.
  uint32_t warmup_concurrency = 0;
  // Load threads, each with its own libcurl multi handle and a share of the concurrency (at
  // most one thread per in-flight request), all taking requests from one source: for more
  // requests/s than one core parses (about 30,000 streams of 128 events per second here).
  uint32_t threads = 1;
  // Each load thread on its own core (loadgen/thread_pinning.h): steadier rates when the client
  // shares a few cores with the server.
  bool pin_threads = false;
  double request_rate_per_s = 0;
  double burstiness = 1;  // open loop: gamma gaps (1 = Poisson), as vLLM's --burstiness
  // Open loop: kConstant sends at exactly 1 / rate gaps (burstiness ignored); kPoisson means
  // Poisson, or gamma when burstiness != 1.
  ArrivalKind arrival = ArrivalKind::kPoisson;
  // Open loop: a ramp of the rate from ramp_start to ramp_end (both > 0; request_rate_per_s is
  // then ignored) over the measured requests (count mode: T = RampSecondsForCount) or over the
  // measurement window (duration mode: from warmup_s for duration_s). arrival_schedule.h.
  RampKind ramp = RampKind::kNone;
  double ramp_start_rate_per_s = 0;
  double ramp_end_rate_per_s = 0;
  // Duration mode (duration_s > 0): one continuous load; requests scheduled in [0, warmup_s)
  // are warm-up (recorded with warmup = true, in no per-request figure), those scheduled in
  // [warmup_s, warmup_s + duration_s) are measured; nothing is scheduled after. num_requests
  // and warmup_requests are then unused.
  double warmup_s = 0;
  double duration_s = 0;
  // Drain: once nothing more will be sent (count mode: after the last send; duration mode:
  // after the window closes), requests still in flight after drain_timeout_s are cancelled and
  // recorded as such (cancelled = true). 0 = wait for each (bounded by request_timeout_s).
  double drain_timeout_s = 0;
  // Multi-turn sessions (sessions > 0): `sessions` conversations of `turns` turns each; turn k
  // sends the whole history (the previous user messages and the answers as received) plus a
  // new user message of input_len_tok words; after a turn ends, the next is sent think_time_s
  // later (fixed, or exponential with that mean when think_time_exponential, seeded). At most
  // `concurrency` sessions are open at once. Measured requests = sessions x turns.
  uint32_t sessions = 0;
  uint32_t turns = 0;
  double think_time_s = 0;
  bool think_time_exponential = false;
  // A set prefix hit rate (workload/prefix_hit_rate.h): the warm-up's requests send the plan's
  // longest shared prefix (then prompts of their own), so the measured ones find it cached.
  bool warmup_primes_prefix = false;
  // Multi-LoRA (workload/lora_choice.h): what a request naming adapter k sends, and how the
  // measured requests choose: by these cumulative weights (PickAdapter with the seed; a session
  // keeps its first turn's), else by the plan's adapters when adapters_from_plan; else the base.
  // The warm-up draws by the same weights (so it loads the adapters the run favours).
  std::vector<AdapterRequest> adapters;
  std::vector<double> adapter_cumulative;
  bool adapters_from_plan = false;
  // Custom prompts: measured request i sends custom_prompts[i % size] (warm-up keeps the
  // synthetic prompts).
  std::vector<CustomPrompt> custom_prompts;
  // Also record what `vllm bench serve` would have measured (RequestRecord::vllm_*), for the
  // --compat vllm summary (vllm_compat.h).
  bool vllm_view = false;
  // /v1/completions only: send prompts as token-id arrays (exact input lengths on any engine)
  // instead of text.
  bool token_id_prompts = false;
  uint64_t seed = 0;
  bool ignore_eos = true;
  double temperature = 0;
  double request_timeout_s = 600;
  // Planned requests (trace replay): when non-empty, measured request i takes plan[i]'s lengths
  // (num_requests must equal plan.size()) and, in open loop without a rate
  // (request_rate_per_s == 0 and replay_arrivals), arrives at plan[i].offset_ns on an absolute
  // schedule, at most `concurrency` in flight when > 0. Warm-up keeps input/output_len_tok.
  std::vector<PlannedRequest> plan;
  bool replay_arrivals = true;
  EarlyStopSettings early_stop;
  // false: a new connection per request, for servers that close a connection after a streamed
  // response while announcing keep-alive (a reused one then dies as the next request is sent).
  bool reuse_connections = true;
  // HTTPS: the server's certificate is verified (chain and host name) against the system's CA
  // store, or against the CA certificate(s) in this PEM file when set.
  std::string ca_file;
  // Skips certificate verification (a self-signed test server); off by default.
  bool insecure_tls = false;
};

// Whether `settings` describe a load that can run; InvalidArgument naming the rule otherwise,
// in the matrix's words (a bench flag has the same name with dashes). When `key` is given it
// receives the matrix key the rule is about (e.g. "sessions", "duration_s"), so the matrix
// loader can point at its line.
Status ValidateLoadSettings(const LoadSettings& settings, std::string* key = nullptr);

// The load generator's settings for a run spec (the URL from the engine adapter).
LoadSettings LoadSettingsFor(schema::RunSpec::Reader spec, const std::string& base_url);

// Whether the settings drive an open loop (a rate, a ramp, or trace replay's own arrivals).
bool IsOpenLoop(const LoadSettings& settings);

// The intended instantaneous rate r(t), t in seconds from the start of the load:
//   t <  S:            r0                       (e.g. during a timed warm-up)
//   S <= t < S + T:    linear:      r0 + (r1 - r0) (t - S) / T
//                      exponential: r0 (r1 / r0)^((t - S) / T)   (geometric growth)
//   t >= S + T:        r1
// Without a ramp r(t) = rate_per_s for all t.
struct RateProfile {
  RampKind ramp = RampKind::kNone;
  double rate_per_s = 0;        // no ramp
  double start_rate_per_s = 0;  // r0, > 0
  double end_rate_per_s = 0;    // r1, > 0
  double ramp_start_s = 0;      // S
  double ramp_s = 0;            // T, > 0
};

// The ramp length T over which a ramp starting at t = 0 spreads `count` arrivals, so that
// Lambda(T) = count: linear T = 2 count / (r0 + r1); exponential T = count ln(k) / (r0 (k - 1))
// with k = r1 / r0 (T = count / r0 when k = 1).
double RampSecondsForCount(RampKind ramp, double start_rate_per_s, double end_rate_per_s,
                           uint32_t count);

// The gap shape of an open loop (gamma with burstiness 1 is Poisson) and its rate over time (no
// ramp: the constant rate; a ramp over the duration window, or spread over `count` arrivals).
ArrivalKind ArrivalKindFor(const LoadSettings& settings);
RateProfile RateProfileFor(const LoadSettings& settings, uint32_t count);

// The warm-up's slots: warmup_concurrency, else concurrency (a closed loop), else max_in_flight
// (an open loop's cap), else every warm-up request at once.
uint32_t WarmupConcurrency(const LoadSettings& settings);

// The adapter (index into settings.adapters) measured request `index` names, -1 for the base:
// the plan's when adapters_from_plan, else drawn by the weights (one rule for the load generator
// and the performance model's virtual runs).
int32_t AdapterOf(const LoadSettings& settings, uint32_t index);

// The warm-up as a load of its own (an agent runs it apart, so its engine counters and signals
// are not the measured phase's): a closed loop at WarmupConcurrency of warmup_requests single
// prompts of the mean lengths, seeded apart so no measured prompt was sent before.
LoadSettings WarmupLoadSettings(const LoadSettings& settings);

}  // namespace servesweep::workload
