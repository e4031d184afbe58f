// Request traces: the Azure LLM inference trace (CSV: TIMESTAMP, ContextTokens,
// GeneratedTokens) and the Mooncake trace (JSONL: timestamp ms, input_length, output_length,
// hash_ids, and optionally adapter: a LoRA adapter's name), read into one form: each request's
// arrival offset from the first one and its input and output lengths. Errors name file:line, what
// was expected and what was found.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace servesweep::workload {

enum class TraceFormat { kAzureCsv, kMooncakeJsonl };

struct TraceRequest {
  int64_t offset_ns = 0;  // arrival after the trace's first request
  uint32_t input_len_tok = 0;
  uint32_t output_len_tok = 0;
  std::vector<uint64_t> hash_ids;  // Mooncake: 512-token prefix blocks (empty for Azure)
  std::string adapter;             // Mooncake's optional "adapter": a LoRA adapter's name
};

// "azure" / "mooncake", or from the file name (.csv -> Azure, .jsonl -> Mooncake).
Status ParseTraceFormat(const std::string& name, const std::string& path, TraceFormat* out);

// Reads up to max_requests requests (0 = all) from the start of the trace. Offsets are relative
// to the first request read.
Status ReadTrace(const std::string& path, TraceFormat format, size_t max_requests,
                 std::vector<TraceRequest>* out);

// Parses "YYYY-MM-DD HH:MM:SS[.fraction]" (UTC) into ns since the epoch; false if malformed.
bool ParseTimestampNs(const std::string& text, int64_t* out_ns);

}  // namespace servesweep::workload
