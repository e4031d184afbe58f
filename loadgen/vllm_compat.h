// The `--compat vllm` view: every figure as `vllm bench serve` computes it, from what its client
// would have seen of the same streams, so a user can check one tool against the other.
//
// Read in vllm-project/vllm:
//   vllm/benchmarks/lib/endpoint_request_func.py @ 02cfb534df5674737558730b10f23d1b7aef9b7c
//     async_request_openai_completions / async_request_openai_chat_completions
//   vllm/benchmarks/serve.py @ 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1
//     calculate_metrics, benchmark() (duration, result dict)
// Its rules, which differ from servesweep's own (docs/metrics.md):
//  - a "token" chunk is any payload whose `choices` is non-empty, whatever it holds: the
//    role-only first chat chunk, empty-text and finish-reason-only chunks count. TTFT = first
//    such chunk - start; ITL = gaps between successive such chunks; latency (E2EL) = last such
//    chunk - start.
//  - usage is read only from chunks whose `choices` is empty (`elif usage := ...`):
//    output tokens = its completion_tokens, prompt length = its prompt_tokens, else the
//    requested prompt length; with no usage, output tokens = 1 (its path without a tokenizer;
//    with one it would re-tokenize the text, which needs the model's tokenizer).
//  - success = HTTP 200, at least one token chunk, and no exception while reading: a payload
//    that is not JSON, a chat choice without `delta`, or a transport error fail the request;
//    an `{"error": ...}` event (no choices, no usage) is ignored.
//  - duration = the benchmark's wall time (t0 -> last request done, as ours); statistics over
//    successful requests; an empty list reports 0 (np.mean(x or 0)); TPOT only for output > 1,
//    goodput counting a 1-token request's TPOT as 0.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"

namespace servesweep::loadgen {

struct VllmChunk {
  bool done = false;         // `[DONE]`
  bool exception = false;    // vLLM's client would raise here (the request fails)
  bool has_choices = false;  // a "token" chunk for vLLM
  bool usage = false;        // a usage read (only when choices is empty)
  uint32_t completion_tokens = 0;
  int64_t prompt_tokens = -1;  // -1 when the usage has none
};

// One `data:` payload as vLLM's client reads it (`chat`: the chat completions client).
VllmChunk ClassifyVllmChunk(std::string_view payload, bool chat);

// The summary `vllm bench serve` would print for these requests (RequestRecord::vllm_*).
BenchSummary SummarizeVllm(const LoadResult& result, const SloLimits& slo = {});

}  // namespace servesweep::loadgen
