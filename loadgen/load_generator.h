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

#include "common/status.h"
#include "loadgen/arrival_schedule.h"
#include "loadgen/client_load.h"
#include "loadgen/early_stop.h"
#include "workload/load_settings.h"

namespace servesweep::loadgen {

// The settings are the workload library's (workload/load_settings.h): one home for their rules,
// which the matrix loader, `bench` and RunLoad all check.
using workload::Api;
using workload::CustomPrompt;
using workload::LoadSettings;
using workload::PlannedRequest;

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
  // The reused keep-alive connection it was first sent on had been closed by the server, so the
  // request never reached the engine; it was sent once more on a new connection, and its times
  // are that second send's. Counted apart (BenchSummary::reconnects), never as a failure.
  bool reconnected = false;
  // output_tokens came from the server's usage.completion_tokens (else: the output chunks'
  // token counts, see openai_stream.h). Recorded so a figure's source is never guessed.
  bool output_tokens_from_usage = false;
  int32_t http_status = 0;  // the response's status; 0 when none arrived
  int32_t session_id = -1;  // multi-turn: the session and the turn (0-based); -1 otherwise
  int32_t turn = -1;
  int32_t adapter = -1;  // the LoRA adapter it named (LoadSettings::adapters); -1 = the base
  // Prompt tokens the server said it served from its prefix cache (openai_stream.h); -1: unsaid.
  int32_t cached_prompt_tokens = -1;
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
  // The load threads' own saturation over the measured phase (client_load.h).
  ClientLoad client;
  // Why the measured phase ended before its full length (settings.early_stop, early_stop.h):
  // kNone when it did not, with the figures that decided and when (seconds of measured phase).
  // A duration-mode window then ends there.
  StopReason stopped = StopReason::kNone;
  std::string stop_evidence;
  double stopped_at_s = 0;
  // RequestRecord::adapter's names (LoadSettings::adapters in order).
  std::vector<std::string> adapter_names;
};

// Runs the load into *out. InvalidArgument (nothing sent) when the settings break a rule of
// workload::ValidateLoadSettings; Internal when libcurl or epoll cannot be set up; otherwise Ok,
// with failed requests recorded in *out, never returned as an error. on_progress (optional) is
// called from a load thread, one call at a time, at most ~10 times/s per thread.
Status RunLoad(const LoadSettings& settings, LoadResult* out,
               const std::function<void(const Progress&)>& on_progress = {});

}  // namespace servesweep::loadgen
