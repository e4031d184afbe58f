// `servesweep bench`'s flags and the load they ask for: which loop (closed with slots, open with
// arrivals, a ramp, multi-turn sessions) follows from which flags were given, as `vllm bench
// serve` reads them (--max-concurrency is an open loop's cap, else the slots).
//
// Thread-safety: one command, one thread.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"

namespace servesweep::cli {

struct BenchOptions {
  loadgen::LoadSettings load;  // what the flags set directly; ResolveBenchLoad finishes it
  std::string api = "completions";
  std::string api_key_env;
  std::string api_key_file;
  std::string result_json;
  loadgen::SloLimits slo;
  std::string arrival = "poisson";
  std::string ramp;
  std::string think_time = "fixed";
  std::string prompts;
  std::string compat;
  uint32_t max_concurrency = 0;  // vLLM's --max-concurrency: the slots, or an open loop's cap
  // The flags whose presence decides the loop (set by AddBenchFlags).
  CLI::Option* concurrency_flag = nullptr;
  CLI::Option* max_concurrency_flag = nullptr;
  CLI::Option* rate_flag = nullptr;
  CLI::Option* ramp_flag = nullptr;
  CLI::Option* sessions_flag = nullptr;
};

// Registers bench's flags on `cmd`, writing into *o (which must outlive the parse).
void AddBenchFlags(CLI::App& cmd, BenchOptions* o);

// After the parse: the loop kind, slots and caps, arrivals, ramp, think time, custom prompts
// (read from their file) and the API key into o->load. InvalidArgument when no loop was asked
// for or --prompts is not jsonl:<file>; the prompt file's and key's own errors.
Status ResolveBenchLoad(BenchOptions* o);

}  // namespace servesweep::cli
