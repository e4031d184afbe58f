// The load generator: drives streaming OpenAI-compatible requests at a URL and records, per
// request, every output chunk's arrival time. It knows a URL, never an engine.
//
// One thread drives all streams through libcurl's multi interface. RunLoad() blocks; it is
// safe to run several RunLoad() calls on different threads (they share nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/loadgen/arrival_schedule.h"

namespace servesweep::loadgen {

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
};

// A prompt given by the user (`prompts: jsonl:<file>`, workload/custom_prompts.h): either a
// completions prompt text or a chat messages array (JSON text), and optionally its own
// max_tokens (0 = the run's output length).
struct CustomPrompt {
  std::string prompt;
  std::string messages_json;  // non-empty: a JSON array of {"role", "content"} messages
  uint32_t max_tokens = 0;
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
  // Closed loop when request_rate_per_s == 0 (concurrency > 0 required). Open loop (Poisson
  // arrivals on an absolute schedule) when > 0, capped at concurrency when concurrency > 0.
  uint32_t concurrency = 1;
  // Load threads, each with its own libcurl multi handle and a share of the concurrency (at
  // most one thread per in-flight request), all taking requests from one source: for more
  // requests/s than one core parses (about 20,000 streams of 128 events per second here).
  uint32_t threads = 1;
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
  // false: a new connection per request, for servers that close a connection after a streamed
  // response while announcing keep-alive (a reused one then dies as the next request is sent).
  bool reuse_connections = true;
  // HTTPS: the server's certificate is verified (chain and host name) against the system's CA
  // store, or against the CA certificate(s) in this PEM file when set.
  std::string ca_file;
  // Skips certificate verification (a self-signed test server); off by default.
  bool insecure_tls = false;
};

struct RequestRecord {
  // Times in ns from the start of the measured phase (steady clock). -1 where not reached.
  uint32_t index = 0;
  bool warmup = false;
  bool success = false;
  std::string error;
  uint32_t prompt_tokens = 0;  // from the usage chunk; else the requested input length
  uint32_t output_tokens = 0;  // from the usage chunk; else the number of output chunks
  int64_t scheduled_ns = -1;
  int64_t start_ns = -1;  // handed to libcurl (vLLM's request start)
  // libcurl begins writing the request on its connection (after connecting, for a new one):
  // where TTFT, TTFB and E2EL start, so the client's own delays are not in them.
  int64_t sent_ns = -1;
  int64_t first_token_ns = -1;  // first chunk that carried output text
  int64_t end_ns = -1;          // last chunk that carried output text
  int64_t done_ns = -1;         // the transfer finished (after [DONE] / end of body)
  // Planned shared prefix: 1 when an earlier request of the run sent the same first prefix
  // block (the engine may find it in its prefix cache), 0 when none did, -1 without a prefix.
  int8_t prefix_seen = -1;
  std::vector<int64_t> chunk_times_ns;
  std::vector<uint32_t> chunk_tokens;
  int64_t first_byte_ns = -1;  // first byte of the response body, whatever it held
  bool cancelled = false;      // cut off by the drain timeout (success false, error says so)
  // output_tokens came from the server's usage.completion_tokens (else: the output chunks'
  // token counts, see openai_stream.h). Recorded so a figure's source is never guessed.
  bool output_tokens_from_usage = false;
  int32_t http_status = 0;  // the response's status; 0 when none arrived
  int32_t session_id = -1;  // multi-turn: the session and the turn (0-based); -1 otherwise
  int32_t turn = -1;
  // The vLLM view (LoadSettings::vllm_view), as vllm/benchmarks/lib/endpoint_request_func.py
  // sees the stream: times of the chunks with non-empty `choices`, usage read only from chunks
  // without choices, and its success rule (HTTP 200, one such chunk, no exception).
  bool vllm_success = false;
  std::vector<int64_t> vllm_chunk_times_ns;
  uint32_t vllm_output_tokens = 0;  // 0 = no usage seen (vLLM then falls back)
  int64_t vllm_prompt_tokens = -1;  // -1 = no usage.prompt_tokens seen
};

struct Progress {
  uint32_t completed = 0;
  uint32_t total = 0;
  bool warmup = false;
};

struct LoadResult {
  // Count mode: measured requests only, in index order. Duration mode: every request, warm-up
  // ones flagged, in send order.
  std::vector<RequestRecord> requests;
  // Measured phase start (window_start_ns) -> last measured completion or cancellation.
  double duration_s = 0;
  // The steady-state window, ns from t0: duration mode [warmup_s, warmup_s + duration_s);
  // count mode [0, last measured send]. Window throughputs use it (bench_metrics.h).
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
  // What drove the arrivals, e.g. "poisson", "constant ramp linear 1->10/s over 20 s".
  std::string arrival;
  int64_t t0_steady_ns = 0;  // t0 on the steady clock (CLOCK_MONOTONIC): aligns the records
                             // with another process's timestamps (the emulator's request log)
};

// Throws std::invalid_argument when settings are inconsistent. Failed requests are recorded,
// never thrown. on_progress (optional) is called from a load thread, one call at a time, at
// most ~10 times/s per thread.
LoadResult RunLoad(const LoadSettings& settings,
                   const std::function<void(const Progress&)>& on_progress = {});

}  // namespace servesweep::loadgen
