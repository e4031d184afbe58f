@0x9927ee43d6dbc39e;
# The experiment matrix once expanded: one RunSpec per run. Evolve only by adding fields.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("servesweep::schema");

struct Layout {
  # Parallel layout of one engine deployment. GPUs used = tp * pp * dp (EP reuses the same GPUs).
  tp @0 :UInt32 = 1;
  pp @1 :UInt32 = 1;
  dp @2 :UInt32 = 1;
  expertParallel @3 :Bool = false;
  # Prefill/decode disaggregation: 0 prefill instances means a single, aggregated pool.
  prefillInstances @4 :UInt32 = 0;
  decodeInstances @5 :UInt32 = 0;
  # GPUs each agent (node) contributes; 0 = use the agents' inventory.
  gpusPerNode @6 :UInt32 = 0;
  # Data-parallel attention inside each instance (SGLang): dp attention groups share the
  # instance's tp GPUs, so the instance has tp GPUs (not tp * dp) and the MoE layers stay TP/EP.
  dpAttention @7 :Bool = false;
}

enum ApiKind {
  completions @0;       # /v1/completions
  chatCompletions @1;   # /v1/chat/completions
}

struct PlannedRequest {
  # One request of a replayed trace: its arrival after the first one, and its lengths.
  offsetNs @0 :Int64;
  inputLenTok @1 :UInt32;
  outputLenTok @2 :UInt32;
  # Shared prefixes: the ids of the prompt's leading 512-token blocks (Mooncake's hash_ids, or a
  # shared-prefix group's); requests with equal leading ids send equal leading tokens, for the
  # first prefixLenTok tokens of the prompt. Empty: the whole prompt is the request's own.
  prefixBlocks @3 :List(UInt64);
  prefixLenTok @4 :UInt32;
  adapter @5 :Text;       # a trace's LoRA adapter name ("" = the base model)
}

struct LengthDistribution {
  # "" or "fixed" (the workload's inputLenTok / outputLenTok), "uniform" (a..b), "normal"
  # (mean a, std b), "lognormal" (median a, sigma b of the log) or "empirical" (a trace's),
  # clamped to [min, max].
  kind @0 :Text;
  a @1 :Float64;
  b @2 :Float64;
  min @3 :UInt32 = 1;
  max @4 :UInt32 = 1048576;
  # "empirical": lengths drawn (with replacement, seeded) from a trace's input or output lengths.
  trace @5 :Text;
  traceFormat @6 :Text;
}

struct Workload {
  name @0 :Text;
  api @1 :ApiKind;
  inputLenTok @2 :UInt32;
  outputLenTok @3 :UInt32;
  numRequests @4 :UInt32;
  warmupRequests @5 :UInt32;
  # Closed loop when requestRatePerS is 0; open loop (Poisson) otherwise, capped by concurrency if > 0.
  concurrency @6 :UInt32;
  requestRatePerS @7 :Float64;
  seed @8 :UInt64;
  ignoreEos @9 :Bool = true;
  temperature @10 :Float64;
  # Trace replay: where the requests come from ("azure:<file>" or "mooncake:<file>"), the
  # speed-up applied to its timestamps, whether its arrival times are replayed (else the
  # concurrency or rate above), and the planned requests (expanded by the coordinator, so
  # agents need no trace file). inputLenTok/outputLenTok then hold the means (used by warm-up).
  trace @11 :Text;
  traceSpeedup @12 :Float64 = 1;
  replayArrivals @13 :Bool = true;
  plan @14 :List(PlannedRequest);
  traceFormat @15 :Text;   # "azure", "mooncake", or "" (from the file name)
  burstiness @16 :Float64 = 1;   # open loop: gamma arrivals of this shape (1 = Poisson)
  tokenIdPrompts @17 :Bool;      # completions: prompts as token-id arrays (exact lengths)
  # Length distributions; when not fixed, the coordinator samples every request's lengths into
  # the plan (offsets unused: replayArrivals is false) and inputLenTok/outputLenTok hold means.
  inputLenDistribution @18 :LengthDistribution;
  outputLenDistribution @19 :LengthDistribution;
  # Shared-prefix groups: request i shares its first sharedPrefixLenTok prompt tokens with the
  # other requests of group i mod sharedPrefixGroups (expanded into the plan's prefix blocks).
  sharedPrefixGroups @20 :UInt32;
  sharedPrefixLenTok @21 :UInt32;
  # Load modes (loadgen/load_generator.h LoadSettings; docs/matrix.md).
  arrival @22 :Text;               # "poisson" or "" (gamma when burstiness != 1), "constant"
  ramp @23 :Text;                  # "", "linear" or "exponential": the rate from start to end
  rampStartRatePerS @24 :Float64;
  rampEndRatePerS @25 :Float64;
  warmupS @26 :Float64;            # duration mode: unmeasured seconds before the window
  durationS @27 :Float64;          # > 0: duration mode, the measurement window in seconds
  drainTimeoutS @28 :Float64;      # cancel requests in flight this long after the last send
  sessions @29 :UInt32;            # multi-turn: conversations of `turns` turns each
  turns @30 :UInt32;
  thinkTimeS @31 :Float64;
  thinkTimeExponential @32 :Bool;
  prompts @33 :Text;               # custom prompts as written ("jsonl:<file>")
  customPrompts @34 :List(CustomPrompt);  # its lines, read by the coordinator
  clientThreads @35 :UInt32 = 1;   # load threads sharing the concurrency (LoadSettings::threads)
  # An open loop's cap on requests in flight (rate, ramp, trace replay): 0 = none. `concurrency`
  # is the closed loop's slots only.
  maxInFlight @36 :UInt32;
  # The warm-up's slots (a closed loop); 0 = concurrency, else maxInFlight, else all at once.
  warmupConcurrency @37 :UInt32;
  earlyStop @38 :EarlyStop;        # off unless set (workload/load_settings.h EarlyStopSettings)
  # A set prefix-cache hit rate (`prefix_hit_rate`; -1: none): every prompt starts with one shared
  # prefix of about this fraction of its tokens in whole cache blocks of the engine, primed by the
  # warm-up (workload/prefix_hit_rate.h; expanded into the plan's prefix blocks).
  prefixHitRate @39 :Float64 = -1;
  # Which adapter of engineConfig.loraAdapters each request names (`workload.lora`): "" = the
  # base model only; "uniform"; "zipf" (the k-th adapter in order with weight 1 / k^loraZipfSkew);
  # "trace" (the plan's adapter names). Seeded per request (workload/lora_choice.h).
  loraChoice @40 :Text;
  loraZipfSkew @41 :Float64 = 1;
}

# workload/load_settings.h EarlyStopSettings; the defaults are its defaults.
struct EarlyStop {
  stable @0 :Bool;
  tolerancePct @1 :Float64 = 5;
  windows @2 :UInt32 = 3;
  windowRequests @3 :UInt32 = 32;
  minRequests @4 :UInt32;
  oversaturated @5 :Bool;
  minS @6 :Float64 = 10;
  windowS @7 :Float64 = 30;
  minGrowth @8 :Float64 = 0.1;
  maxDurationS @9 :Float64;
}

struct CustomPrompt {
  prompt @0 :Text;                 # completions text, or ""
  messagesJson @1 :Text;           # a chat messages array as JSON, or ""
  maxTokens @2 :UInt32;            # 0 = the workload's output length
}

struct Slo {
  # 0 = no limit on that metric.
  ttftMs @0 :Float64;
  tpotMs @1 :Float64;
  e2elMs @2 :Float64;
}

struct SimSettings {
  # The emulator's fixed timing, used when no performance model is named.
  ttftMs @0 :Float64 = 20;
  itlMs @1 :Float64 = 5;
  startupMs @2 :Float64 = 0;
  # Performance model (perfmodel/): a hardware profile (a shipped name such as "h200", or a
  # YAML path) and a model profile ("" = inferred from the run's model name).
  hardware @3 :Text;
  modelProfile @4 :Text;
  # Speculative decoding (engine_config.spec_num_tokens > 0): mean draft tokens accepted per
  # step, which the model cannot know; the engine reports it as its acceptance.
  specAcceptedTok @5 :Float64;
  # Quality tasks: the probability that an arithmetic question in the shipped format
  # (workload/task_set.h) is answered correctly (seeded per question); 1 = always.
  answerAccuracy @6 :Float64 = 1;
  # Multi-LoRA: what the fixed-timing emulator adds to a request's first token when its adapter
  # is not among the maxLoras most recently used (loaded into a slot, evicting the oldest).
  loraLoadMs @7 :Float64 = 20;
}

struct EngineConfig {
  # How the agent starts (or reaches) the engine. Adapters map these to each engine's own flags
  # through the flag tables in engines/flags/ (one per engine version). 0, "" and
  # `default` leave the engine's own default (no flag is passed).
  enum Toggle {
    default @0;
    on @1;
    off @2;
  }
  modelPath @0 :Text;           # weights: a GGUF file (llamacpp), a folder or hub id; "" = model
  maxNumSeqs @1 :UInt32;        # requests batched at once (llama.cpp: slots, -np)
  maxBatchedTokens @2 :UInt32;  # tokens per engine step (llama.cpp: logical batch, -b)
  contextLenTok @3 :UInt32;     # context length (llama.cpp: total over all slots, -c)
  threads @4 :UInt32;           # CPU threads (llama.cpp -t)
  prefixCaching @5 :Toggle;
  chunkedPrefill @6 :Toggle;
  chunkedPrefillTok @7 :UInt32;  # chunk size where the engine takes one (SGLang)
  specMethod @8 :Text;          # speculative decoding: "eagle", "eagle3", "ngram", "mtp", "draft"
  specModel @9 :Text;           # draft model (path or hub id)
  specNumTokens @10 :UInt32;    # speculative tokens per step
  kvTransfer @11 :Text;         # P/D KV transfer: vLLM connector ("NixlConnector"), SGLang backend
  gpuMemoryFraction @12 :Float64;
  distPort @13 :UInt16;         # multi-node rendezvous port; 0 = derived from the run id
  # engine: template (an engine servesweep does not know): argv with {placeholders}.
  command @14 :List(Text);
  healthPath @15 :Text;         # "" = /health
  metricsPersona @16 :Text;     # whose /metrics names it exposes ("vllm", "sglang", "llamacpp")
  # engine: external (a managed endpoint; nothing is started).
  baseUrl @17 :Text;            # e.g. https://api.example.com (requests go to <baseUrl>/v1/...)
  apiKeyEnv @18 :Text;          # name of the environment variable holding the key (never the key)
  priceInputPerMTok @19 :Float64;   # price per million input (prompt) tokens
  priceOutputPerMTok @20 :Float64;  # price per million output tokens
  currency @21 :Text;
  apiKeyFile @22 :Text;         # a file holding the key, when no apiKeyEnv (never the key itself)
  # The rest of the price (coordinator/cost_model.h): a GPU per hour (self-hosted), and input
  # tokens served from the prefix cache (a managed API's cached-input price).
  priceGpuHour @23 :Float64;
  priceCachedInputPerMTok @24 :Float64;
  # Speculative decoding's draft tree where the engine takes one (SGLang's EAGLE family:
  # --speculative-eagle-topk and --speculative-num-draft-tokens, the tree's size counting the
  # verified root token); 0 = a chain (top-k 1, specNumTokens + 1 draft tokens).
  specEagleTopk @25 :UInt32;
  specNumDraftTokens @26 :UInt32;
  # Multi-LoRA serving (`engine_config.lora`, docs/matrix.md#multi-lora): adapters served beside
  # the base model; none = none. 0 and "" leave the engine's default.
  loraAdapters @27 :List(LoraAdapter);
  maxLoras @28 :UInt32;      # adapters in one batch (vLLM --max-loras, SGLang --max-loras-per-batch)
  maxLoraRank @29 :UInt32;   # the largest adapter rank the engine reserves for
  maxCpuLoras @30 :UInt32;   # adapters kept in host memory (vLLM --max-cpu-loras)
  loraBackend @31 :Text;     # SGLang --lora-backend
  # Front-end processes that tokenise, admit and stream requests (vLLM --api-server-count,
  # SGLang --tokenizer-worker-num); 0 = the engine's default (vLLM 0.33: one per DP rank).
  apiServerCount @32 :UInt32;
}

struct LoraAdapter {
  name @0 :Text;   # what requests select it by
  path @1 :Text;   # its weights on the engine's node (a PEFT folder; llama.cpp: a GGUF file)
}

struct RunSpec {
  runId @0 :Text;          # stable across restarts: "<sweep>-<index>-<hash of the conditions>"
  sweepName @1 :Text;
  index @2 :UInt32;
  repeat @3 :UInt32;
  engine @4 :Text;         # "sim", "vllm", "sglang", "llamacpp", "external"
  engineVersion @5 :Text;
  engineFlags @6 :List(Text);
  image @7 :Text;
  model @8 :Text;
  checkpointRevision @9 :Text;
  precision @10 :Text;
  quantization @11 :Text;
  kvCacheDtype @12 :Text;
  layout @13 :Layout;
  gpusNeeded @14 :UInt32;  # derived from layout
  nodesNeeded @15 :UInt32; # derived from layout and gpusPerNode
  workload @16 :Workload;
  slo @17 :Slo;
  sim @18 :SimSettings;
  timeoutS @19 :Float64 = 600;
  maxAttempts @20 :UInt32 = 3;
  label @21 :Text;         # human-readable summary of the varied axes
  baseline @22 :Bool;      # selected by the matrix's `baseline` condition
  # The values of the axes a comparison group does not vary (`compare:`): runs with equal,
  # non-empty groups differ only in the compared axes. "" when the matrix has no `compare`.
  compareGroup @23 :Text;
  engineConfig @24 :EngineConfig;
  quality @25 :QualitySettings;
  # The validity gate: a run with a lower share of successful measured requests is invalid.
  minSuccessRate @26 :Float64 = 0.95;
  # docs/matrix.md#engine-lifecycle: perConfiguration keeps one engine up for the runs of one
  # configuration placed on the same agent, one after another; perRun starts a cold engine for
  # every run (to measure cold start itself).
  engineLifecycle @27 :EngineLifecycle;
  # A digest of every engine-side key (engine, version, flags, image, model, checkpoint,
  # precision, quantization, KV dtype, layout, engine settings, emulator settings): runs with
  # the same one can share an engine. "cfg-" and 12 hex digits.
  engineConfiguration @28 :Text;
}

enum EngineLifecycle {
  perConfiguration @0;
  perRun @1;
}

struct QualityTask {
  # One question with a known answer.
  prompt @0 :Text;
  answer @1 :Text;
}

struct QualitySettings {
  # The quality gate (`quality:` in the matrix): after the measured phase the head sends every
  # task at temperature 0 and scores exact matches. taskSet "" = no quality tasks.
  taskSet @0 :Text;          # "arithmetic" (generated) or "jsonl:<file>"
  count @1 :UInt32;          # tasks (arithmetic: generated; jsonl: the first count, 0 = all)
  seed @2 :UInt64;
  marginAccuracy @3 :Float64;   # a configuration below the baseline's accuracy by more fails
  maxTokens @4 :UInt32 = 16;
  numericAnswers @5 :Bool;   # score the first number of the reply (arithmetic) or its whole text
  tasks @6 :List(QualityTask);  # expanded by the coordinator, so agents need no file
}

struct ProbeSettings {
  # Hardware probes every agent runs before any run is placed on it.
  enabled @0 :Bool;
  excludeUnhealthy @1 :Bool;   # place no run on an agent whose probes are not all healthy
  repeats @2 :UInt32 = 5;
}

struct Matrix {
  name @0 :Text;
  sourcePath @1 :Text;
  sourceHash @2 :Text;     # hex digest of the matrix file's text
  runs @3 :List(RunSpec);
  probes @4 :ProbeSettings;
  # Axes a comparison group varies (`compare:`); runs equal in all other axes form one group.
  compareAxes @5 :List(Text);
}
