// Engine profiles: what one serving engine (vLLM, SGLang, llama.cpp, ...) over a range of its
// versions adds to the hardware's roofline: how efficiently its kernels use the GPU as a
// function of the step's shape, its per-layer launch floor with and without CUDA graphs, the
// latency floor of its collectives, the CPU time of its scheduler per step (growing with the
// batch), its per-request front-end cost, its scheduler's defaults, and, when `servesweep
// calibrate` fitted it, what it was fitted on and its error. Every coefficient is data in
// profiles/engines/*.yaml (embedded like the hardware and model profiles); none is a constant in
// code. A default-constructed EngineProfile is the bare roofline (no floors, no CPU time, full
// efficiency) that the unit tests check the equations against.
//
//   EngineProfile vllm;
//   std::string why;
//   // by engine, version and kind of model
//   Status s = SelectEngineProfile("vllm", "0.6.0", "dense", &vllm, &why);
//   Status t = LoadEngineProfile("profiles/engines/my-fit.yaml", &vllm);
//
// Thread-safety: pure functions over values; a loaded profile is an immutable value.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace servesweep::perfmodel {

// What a calibration was fitted on (written by `servesweep calibrate`): a run whose model,
// hardware or layout is not listed, or whose lengths or load fall outside the ranges, is an
// extrapolation.
struct CalibrationRange {
  std::vector<std::string> models;                // model profile names
  std::vector<std::string> hardware;              // hardware profile names
  std::vector<std::string> layouts;               // "tp4", "tp8 dp8 dp-attention", "tp1 ep8", ...
  double input_tok_min = 0, input_tok_max = 0;    // mean input length per point
  double output_tok_min = 0, output_tok_max = 0;  // mean output length per point
  // Load: the highest number of requests in flight the points drove (closed loop: the
  // concurrency; open loop: rate x E2E, Little's law).
  double load_min = 0, load_max = 0;
};

struct Calibration {
  bool fitted = false;               // false: the coefficients are assumptions (uncalibrated)
  std::string fitted_at;             // date, as written
  std::string fitted_by;             // the command line
  std::vector<std::string> sources;  // the points' sources (tables, databases)
  int points = 0;
  double fit_error_pct = 0;  // median |predicted / measured - 1| over the fitted metrics, %
  // Uncalibrated profiles: the model's typical error on pairs it was not fitted to (measured on
  // the fidelity suite, tests/fidelity), so an uncalibrated figure says how far off it may be.
  double typical_error_pct = 0;
  CalibrationRange range;
};

// The coefficients. Units in names; "efficiency" = fraction of what the hardware profile says is
// achievable (its peak x its efficiency), so hardware and engine stay separate.
struct EngineCoefficients {
  // GEMMs of the dense layers: efficiency(T) = gemm_efficiency x T / (T + gemm_half_tok) of the
  // achievable FLOP/s at T tokens in the step (small steps cannot fill the tensor cores), and
  // streaming weights at weight_read_efficiency of the achievable HBM bandwidth.
  double gemm_efficiency = 1;
  double gemm_half_tok = 0;
  double weight_read_efficiency = 1;
  // MoE expert GEMMs (grouped, often block-scaled): expert_gemm_efficiency x t / (t +
  // expert_half_tok) at t tokens per expert, and their weights read at expert_read_efficiency.
  double expert_gemm_efficiency = 1;
  double expert_half_tok = 0;
  double expert_read_efficiency = 1;
  // Attention kernels by kind ("gqa", "mla", "sparse"): one efficiency on both their FLOP/s and
  // their KV reads; kinds not listed get 1.
  std::map<std::string, double> attention_efficiency;
  // Per-layer floor. With CUDA graphs (steps of at most cuda_graph_max_tok tokens, decode-only
  // unless graph_mixed_batches) a layer adds layer_gpu_us of small kernels and gaps; without
  // them the CPU launches every kernel, layer_launch_us per layer, and the GPU waits for it.
  double layer_gpu_us = 0;
  // An MLA layer's extra floor on top of layer_gpu_us: its absorbed path runs more small kernels
  // than a GQA layer (the query and KV down and up projections and their norms, rope, the
  // absorbing batched GEMMs; with block-scaled FP8 weights a quantisation before each GEMM).
  double mla_layer_gpu_us = 0;
  double layer_launch_us = 0;
  int cuda_graph_max_tok = 0;  // 0: never graphs (eager); CPU engines: 0 with no launch cost
  bool graph_mixed_batches = false;
  // Collectives: latency floor per all-reduce (TP, DP-attention gather/scatter) and per EP
  // dispatch or combine, on top of the link's own latency.
  double allreduce_us = 0;
  double all_to_all_us = 0;
  // The engine's CPU per step: scheduling, input preparation, sampling, detokenisation, growing
  // with the requests in the batch and the tokens scheduled; cpu_overlap of it (0..1) runs
  // behind the GPU (SGLang's overlap scheduler, vLLM's async scheduling).
  double step_cpu_us = 0;
  double seq_cpu_us = 0;
  double tok_cpu_us = 0;
  double cpu_overlap = 0;
  // Front end per request (HTTP, tokenisation) before it reaches the scheduler: in TTFT. A
  // latency: any number of requests pass at once.
  double request_us = 0;
  // The API server's serial CPU, per process (DeploymentConfig::api_servers share the requests,
  // each request's tokens stay on its process): per request on its way in (HTTP, chat template,
  // tokenisation, admission) and per output token on its way out (detokenisation, SSE). They cap
  // a process at 1e6 / api_request_us requests/s and 1e6 / api_token_us tokens/s; requests and
  // tokens beyond wait in its queue (in TTFT, ITL), while the engine's steps go on. 0: no cap.
  double api_request_us = 0;
  double api_token_us = 0;
  // Cold start, process start to ready: init_s (interpreter and imports, device and distributed
  // init, the memory-profiling run, torch.compile), the weights read at weight_load_gb_per_s per
  // GPU (capped by the hardware's host link), then graph_capture_s when the engine captures
  // graphs (cuda_graph_max_tok > 0). The defaults are the first-order assumption of a weight
  // stream at 5 GB/s and 10 s of graphs.
  double startup_init_s = 0;
  double weight_load_gb_per_s = 5;
  double graph_capture_s = 10;
};

// Scheduler defaults of the engine (a matrix's engine_config overrides them).
struct EngineDefaults {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;  // token budget per step (with chunked prefill)
  bool chunked_prefill = true;        // false: a prompt is prefilled whole, in one step
  // Prefill chunks share steps with decodes (vLLM V1, SGLang); false: a step is all prefill or
  // all decode, prefills first (vLLM V0 without chunked prefill).
  bool mixed_batches = true;
  double gpu_memory_utilization = 0.9;
  double activation_reserve_gb = 1;
  int decode_steps = 1;       // decode steps per schedule (vLLM 0.6's --num-scheduler-steps)
  int prefill_chunk_tok = 0;  // prompt tokens per step at most (SGLang --chunked-prefill-size)
  // KV tokens a sliding-window layer is given per token of a full layer, in the KV capacity:
  // 1 = every layer holds every token (one pool); vLLM's hybrid KV manager (0.10+) ~0 (a
  // sequence's sliding layers keep only their window, not counted); SGLang's SWA pool 0.8
  // (--swa-full-tokens-ratio's default, 0.5.23).
  double sliding_kv_ratio = 1;
  // Larger limits on GPUs of at least large_gpu_memory_gb, except those named (vLLM V1's
  // arg_utils.py: max_num_seqs 1024 and 8192 batched tokens on 70 GB+ GPUs other than A100s).
  double large_gpu_memory_gb = 0;  // 0: none
  std::vector<std::string> large_gpu_except;
  int large_gpu_max_num_seqs = 0;
  int large_gpu_max_num_batched_tokens = 0;
};

struct VersionRange {
  std::string from;    // inclusive; "" = any
  std::string before;  // exclusive; "" = any
};

// The kinds of model a profile's coefficients are for: every kind, or dense or MoE models only.
// A MoE model's steps (expert GEMMs, far more weights than it reads per token, MLA) load the
// GPU and the scheduler unlike a dense model's, so a fit across both follows whichever kind has
// more figures; a profile per kind keeps one kind's fit from moving the other's coefficients.
inline constexpr const char* kAnyArchitecture = "any";
inline constexpr const char* kDenseArchitecture = "dense";
inline constexpr const char* kMoeArchitecture = "moe";

struct EngineProfile {
  std::string name;    // "vllm-0.6"; "" for the bare roofline
  std::string engine;  // "vllm", "sglang", "llamacpp", or "any" (the fallback profile)
  std::string source;  // file it came from
  VersionRange versions;
  std::string architecture = kAnyArchitecture;  // "any", "dense" or "moe"
  EngineDefaults defaults;
  EngineCoefficients coefficients;
  Calibration calibration;
};

// Parse/load a profile; unknown keys and bad values are errors with file:line:column.
Status ParseEngineProfile(std::string_view yaml, const std::string& origin, EngineProfile* out);
// A shipped name ("vllm-0.6") or a YAML path.
Status LoadEngineProfile(const std::string& name_or_path, EngineProfile* out);
std::vector<std::string> ShippedEngineProfiles();

// The shipped profile for an engine at a version, for a model of `architecture` ("dense" or
// "moe"; "" counts as dense). The version picks the range: the one holding it, else the
// nearest (or the newest when none is given), said in *why. Within the range: the kind's own
// profile, else one for every kind, else the other kind's (said in *why: a prediction across
// kinds). An engine without profiles takes the fallback "default" (uncalibrated), also said.
// *why is "" when the version is in range and the profile is for the model's kind.
Status SelectEngineProfile(const std::string& engine, const std::string& version,
                           const std::string& architecture, EngineProfile* out, std::string* why);
// Whether a profile's coefficients are for models of `architecture` ("dense" or "moe").
bool ProfileCoversArchitecture(const EngineProfile& profile, const std::string& architecture);

// -1, 0, 1 as version a is below, equal to, above b: dotted numbers compared numerically
// ("0.10.1" > "0.9"), a leading 'v' ignored, a suffix after the numbers ("rc1", ".post3")
// ignored. False when either has no leading number.
bool CompareVersions(const std::string& a, const std::string& b, int* order);
bool InVersionRange(const VersionRange& range, const std::string& version);

// The coefficients as named scalars, for `servesweep calibrate` (which fits some of them) and
// for writing a profile back: "gemm_efficiency", "attention_efficiency.mla", ... Get fails on
// an unknown name with the known ones listed.
std::vector<std::string> CoefficientNames(const EngineProfile& profile);
Status GetCoefficient(const EngineProfile& profile, const std::string& name, double* value);
// Setting clamps to the coefficient's bounds, which CoefficientBounds gives.
Status SetCoefficient(EngineProfile* profile, const std::string& name, double value);
Status CoefficientBounds(const std::string& name, double* min_value, double* max_value);

// The profile as YAML in the format ParseEngineProfile reads (comments: `header`).
std::string EngineProfileYaml(const EngineProfile& profile, const std::string& header);

}  // namespace servesweep::perfmodel
