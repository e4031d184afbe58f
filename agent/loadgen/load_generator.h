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
  double request_rate_per_s = 0;
  double burstiness = 1;  // open loop: gamma gaps (1 = Poisson), as vLLM's --burstiness
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
  int64_t start_ns = -1;
  int64_t first_token_ns = -1;  // first chunk that carried output text
  int64_t end_ns = -1;          // last chunk that carried output text
  int64_t done_ns = -1;         // the transfer finished (after [DONE] / end of body)
  // Planned shared prefix: 1 when an earlier request of the run sent the same first prefix
  // block (the engine may find it in its prefix cache), 0 when none did, -1 without a prefix.
  int8_t prefix_seen = -1;
  std::vector<int64_t> chunk_times_ns;
  std::vector<uint32_t> chunk_tokens;
};

struct Progress {
  uint32_t completed = 0;
  uint32_t total = 0;
  bool warmup = false;
};

struct LoadResult {
  std::vector<RequestRecord> requests;  // measured requests only, in index order
  double duration_s = 0;                // first measured send -> last measured completion
  int64_t t0_steady_ns = 0;  // t0 on the steady clock (CLOCK_MONOTONIC): aligns the records
                             // with another process's timestamps (the emulator's request log)
};

// Throws std::invalid_argument when settings are inconsistent. Failed requests are recorded,
// never thrown. on_progress (optional) is called from the load thread at most ~10 times/s.
LoadResult RunLoad(const LoadSettings& settings,
                   const std::function<void(const Progress&)>& on_progress = {});

}  // namespace servesweep::loadgen
