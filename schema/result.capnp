@0x8eaa26b80ae44c06;
# What an agent measures and ships back; also the agent's spool file format. Evolve only by adding fields.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("servesweep::schema");
using Spec = import "run_spec.capnp";

struct LatencyStats {
  # Milliseconds (or the unit in the field's name). NaN where nothing was measured.
  mean @0 :Float64;
  median @1 :Float64;
  std @2 :Float64;
  p90 @3 :Float64;
  p95 @4 :Float64;
  p99 @5 :Float64;
  min @6 :Float64;
  max @7 :Float64;
  count @8 :UInt64;
}

struct RequestRecord {
  # Times in nanoseconds from the start of the measured phase (steady clock).
  index @0 :UInt32;
  success @1 :Bool;
  error @2 :Text;
  promptTokens @3 :UInt32;
  outputTokens @4 :UInt32;
  scheduledNs @5 :Int64;
  startNs @6 :Int64;
  firstTokenNs @7 :Int64;  # first chunk that carried output; -1 if none
  endNs @8 :Int64;         # last output chunk
  chunkTimesNs @9 :List(Int64);   # each chunk that carried output
  chunkTokens @10 :List(UInt32);  # tokens carried by each such chunk, where known
  warmup @11 :Bool;
  firstByteNs @12 :Int64;  # first byte of the response body; -1 if none
  cancelled @13 :Bool;     # cut off by the drain timeout
  sessionId @14 :Int32;    # multi-turn: session and turn (0-based); -1 otherwise
  turn @15 :Int32;
  doneNs @16 :Int64;       # the transfer ended (finished or cancelled)
  outputTokensFromUsage @17 :Bool;  # outputTokens is the server's usage (else chunk token counts)
  httpStatus @18 :Int32;            # the response's HTTP status; 0 when none arrived
  sentNs @19 :Int64;       # libcurl began writing the request on its connection; -1 if never
  # Resent once on a new connection: the reused one had been closed by the server before the
  # request reached it (times are the second send's).
  reconnected @20 :Bool;
  adapter @21 :Text;       # the LoRA adapter it named; "" = the base model
  # Prompt tokens the server says it served from its prefix cache (usage.prompt_tokens_details
  # .cached_tokens, llama.cpp's timings.cache_n); -1 when it said nothing.
  cachedPromptTokens @22 :Int32 = -1;
}

struct EngineSample {
  # One scrape of the engine's /metrics, reduced to the signals of the benchmark record.
  atNs @0 :Int64;
  name @1 :Text;           # servesweep's signal name, e.g. "kv_cache_usage"
  value @2 :Float64;
}

struct ProbeResult {
  name @0 :Text;           # e.g. "cuda.device_query", "hbm.triad"
  status @1 :Text;         # "ok", "no_gpu", "failed"
  value @2 :Float64;
  unit @3 :Text;
  detail @4 :Text;
  gpu @5 :Int32;           # -1 when the probe is not of one GPU
  expected @6 :Float64;    # what a healthy GPU of this model reaches; 0 when unknown
  verdict @7 :Text;        # "ok", "below_spec", "outlier", or "" when not judged
  reason @8 :Text;
}

struct BenchmarkRecord {
  # Conditions. Text fields hold "n/a" with a reason when not applicable, never "".
  model @0 :Text;
  checkpointRevision @1 :Text;
  engine @2 :Text;
  engineVersion @3 :Text;
  engineCommit @4 :Text;
  gpuModel @5 :Text;
  gpuCount @6 :UInt32;
  interconnect @7 :Text;
  precision @8 :Text;
  quantization @9 :Text;
  kvCacheDtype @10 :Text;
  tp @11 :UInt32;
  ep @12 :Bool;
  pp @13 :UInt32;
  dp @14 :UInt32;
  pdSplit @15 :Text;
  inputLenDist @16 :Text;
  outputLenDist @17 :Text;
  concurrency @18 :UInt32;
  requestRatePerS @19 :Float64;
  arrival @20 :Text;
  warm @21 :Bool;
  warmupRequests @22 :UInt32;

  # Figures over the measured requests, computed as `vllm bench serve` does.
  durationS @23 :Float64;
  completed @24 :UInt32;
  failed @25 :UInt32;
  successRate @26 :Float64;
  totalInputTokens @27 :UInt64;
  totalOutputTokens @28 :UInt64;
  requestThroughput @29 :Float64;
  outputThroughput @30 :Float64;
  totalTokenThroughput @31 :Float64;
  ttftMs @32 :LatencyStats;
  tpotMs @33 :LatencyStats;
  itlMs @34 :LatencyStats;
  e2elMs @35 :LatencyStats;
  decodeTokPerSPerRequest @36 :LatencyStats;
  prefillTokPerSPerRequest @37 :LatencyStats;
  outputThroughputPerGpu @38 :Float64;
  goodput @39 :Float64;           # requests/s meeting every SLO limit; NaN without an SLO
  coldStartMs @40 :Float64;       # engine process start -> ready

  # Engine signals scraped during the measured phase. NaN where the engine does not expose them.
  kvCacheUsageMax @41 :Float64;
  runningMax @42 :Float64;
  waitingMax @43 :Float64;
  preemptions @44 :Float64;
  prefixCacheHits @45 :Float64;
  prefixCacheQueries @46 :Float64;
  specDecodeAcceptance @47 :Float64;

  # "" for a measured run; for a virtual run (`plan --simulate`), what simulated it, e.g.
  # "perfmodel: hardware h200, model llama-3.1-8b". Such figures were never measured.
  simulation @48 :Text;

  # The quality gate (after the measured phase; not timed, not in the figures above): tasks
  # sent, answers that matched exactly, their ratio (NaN without a task set), and the task set.
  qualityTasks @49 :UInt32;
  qualityCorrect @50 :UInt32;
  qualityAccuracy @51 :Float64;
  qualityTaskSet @52 :Text;

  # GPU telemetry of the head node, nvidia-smi every second over the measured phase (series in
  # RunResult.engineSamples as gpu<i>.util_pct, .memory_used_mib, .power_w, .sm_clock_mhz).
  # NaN without samples; gpuTelemetry says where they came from or why there are none.
  gpuTelemetry @53 :Text;            # "nvidia-smi: 8 GPU(s), 120 samples each" or "n/a: <why>"
  gpuUtilMeanPct @54 :Float64;       # mean over GPUs and samples
  gpuMemoryUsedMaxMib @55 :Float64;  # highest on any GPU
  gpuPowerMeanW @56 :Float64;        # mean per GPU
  gpuSmClockMeanMhz @57 :Float64;    # mean over GPUs and samples

  # Provenance of the head node ("n/a: <why>" when unknown).
  driverVersion @58 :Text;
  cudaVersion @59 :Text;           # as the driver reports it (nvidia-smi)
  ncclVersion @60 :Text;           # libnccl.so.2 the agent loads, else what the engine reports
  gpuTopology @61 :Text;           # `nvidia-smi topo -m` as printed

  # Shared-prefix workloads: TTFT of the requests whose first prefix block an earlier request
  # had sent (possible prefix-cache hits) and of the first senders (misses). NaN otherwise.
  ttftPrefixSeenMs @62 :LatencyStats;
  ttftPrefixNewMs @63 :LatencyStats;

  # The container image the run asked for ("n/a: none, the engine ran from the host's install").
  image @64 :Text;

  # Load modes (docs/metrics.md): measured requests cut off by the drain timeout (also counted
  # in failed), client-side queue time (start - scheduled), time to the first body byte, and the
  # steady-state window with its aggregate throughputs (NaN when the window is empty).
  cancelled @65 :UInt32;
  clientQueueMs @66 :LatencyStats;
  ttfbMs @67 :LatencyStats;
  windowS @68 :Float64;
  windowOutputThroughput @69 :Float64;
  windowTotalTokenThroughput @70 :Float64;
  # Where the output tokens came from: "server usage", "chunk count", or a mix with counts.
  outputTokensSource @71 :Text;
  # Client send delay (sent - start): connection setup and the wait inside libcurl before the
  # request went out, kept out of TTFT and E2EL.
  clientSendMs @72 :LatencyStats;

  # The run's certificate (docs/metrics.md#certified-runs): the validity gate and the
  # client-bound verdict. Invalid and client-bound runs stay recorded; reports, knees, frontiers
  # and comparisons leave them out unless asked (--include-invalid).
  validity @73 :Validity;          # notJudged until the gate ran (results.db stores its name)
  validityReasons @74 :Text;       # every failed check (invalid), or why nothing was checked
  reconciliation @75 :Text;        # per counter: the client's count and the engine's, or why not
  engineRestarts @76 :UInt32;
  clientBound @77 :Bool;
  clientBoundReasons @78 :Text;
  loadThreadBusyMax @79 :Float64;  # CPU time / wall time of the busiest load thread
  readLagP99Ms @80 :Float64;       # kernel receive stamp -> read by the load thread, p99
  sendLatenessP99Ms @81 :Float64;  # due (scheduled and a free slot) -> handed to libcurl, p99
  # Requests resent once on a new connection: the server had closed the reused keep-alive one
  # before the request reached it (not counted as failed).
  reconnects @82 :UInt32;
  failureReasons @83 :Text;        # the top reasons, "8 x HTTP 404: ...; 1 x ..."
  scrapeIntervalMs @84 :UInt32;    # /metrics: the first interval (it doubles every 20 scrapes)
  measuredScrapes @85 :UInt32;     # scrapes inside the measured phase
  maxInFlight @86 :UInt32;         # an open loop's cap on requests in flight (0 = none)
  # Simulated runs (`plan --simulate`): the engine profile whose coefficients costed the steps
  # and its calibration, e.g. "sglang-0.3 (fitted 2026-12-01 on 8 points: ...)" or "default
  # (uncalibrated)"; the error to expect of its figures, in % (the fit's median absolute error,
  # or an uncalibrated profile's typical error); and the run's standing: "calibrated",
  # "extrapolated: <what lies outside the fit>" or "uncalibrated: <why>". "" / NaN when measured.
  calibration @87 :Text;
  calibrationErrorPct @88 :Float64;
  calibrationStanding @89 :Text;
  # The engine's own resolution of the settings a comparison depends on (batch and prefill
  # budgets, running requests, speculative tokens per step, chunk size, KV dtype), read back from
  # the engine check before it started (docs/engines.md#effective-settings); empty when none ran.
  effectiveSettings @90 :List(EffectiveSetting);
  effectiveSettingsSource @91 :Text;  # "vllm 0.33.0 engine config (check on agent A)" or "n/a: why"
  # The engine the run was measured on (docs/results.md#engine-lifecycle): its id, this run's
  # position on it (0: the run that started it, and the only one whose coldStartMs is the
  # engine's), its age when this run began, and the prefix cache's state at the run's start:
  # "cold" (a fresh engine), "reset" (reset, the engine idle), "not_reset: why".
  engineId @92 :Text;
  engineRunIndex @93 :UInt32;
  engineAgeS @94 :Float64;
  engineLifecycle @95 :Text;      # "per_configuration", "per_run"
  cacheState @96 :Text;
  # Seconds the run held its GPUs on the head: from the assignment's start to its result
  # (starting or resetting the engine, warm-up, the measured phase, quality tasks, draining).
  attemptS @97 :Float64;
  # Why the measured phase ended before its full length (the workload's early_stop,
  # docs/results.md#early-stop): "" (it ran its length), "stable", "oversaturated" or
  # "max_duration" in results.db; the figures that decided; and when, in seconds of measured
  # phase.
  stopped @98 :StopReason;
  stopEvidence @99 :Text;
  stoppedAtS @100 :Float64;
  # Simulated runs: how far the run lies from what its profile was fitted on ("in range",
  # "other model", ... perfmodel/calibration.h) and the cross-validated band of that kind
  # (profiles/error_bands.yaml: 80% of held-out figures of the kind fell within low..high,
  # predicted / measured - 1 in %); NaN when the band is unknown (too few cases) or measured.
  calibrationKind @101 :Text;
  calibrationBandLowPct @102 :Float64;
  calibrationBandHighPct @103 :Float64;
  # The energy the run's GPUs spent over the measured phase (record/run_energy.h,
  # docs/results.md#energy): where it came from ("counter (GPU 0: 250.0 J)", "power samples
  # every 1000 ms (...)", "n/a: why"), whether it is valid and why not, joules (NaN unknown) over
  # energyWindowS, per completed request, per output and per total token; a disaggregated run's
  # prefill and decode GPUs apart (NaN otherwise), per input and per output token.
  energySource @104 :Text;
  energyValid @105 :Bool;
  energyInvalidReason @106 :Text;
  energyJ @107 :Float64;
  energyWindowS @108 :Float64;
  energyPerRequestJ @109 :Float64;
  energyPerOutputTokJ @110 :Float64;
  energyPerTotalTokJ @111 :Float64;
  energyPrefillJ @112 :Float64;
  energyDecodeJ @113 :Float64;
  energyPrefillPerInputTokJ @114 :Float64;
  energyDecodePerOutputTokJ @115 :Float64;
  # A set prefix-cache hit rate (the workload's prefix_hit_rate, docs/metrics.md#prefix-hit-rate):
  # the fraction of the measured prompt tokens asked for (NaN: none set) and the one the engine
  # counted over the measured phase (its hits' increase over its queries' increase; NaN when it
  # exposes no counter or counted no query). The validity gate compares them.
  prefixHitRateTarget @116 :Float64;
  prefixHitRate @117 :Float64;
  # Multi-LoRA: the measured requests' figures per adapter (docs/metrics.md#per-adapter).
  adapterFigures @118 :List(AdapterFigures);
  # Prefix-cache hit and miss apart (docs/metrics.md#hit-and-miss): successful measured requests
  # whose server reported cached prompt tokens (> 0: a hit, 0: a miss); count 0 when none said.
  ttftHitMs @119 :LatencyStats;
  ttftMissMs @120 :LatencyStats;
  prefillTokPerSHit @121 :LatencyStats;   # prompt tokens / TTFT, per request
  prefillTokPerSMiss @122 :LatencyStats;
}

struct AdapterFigures {
  adapter @0 :Text;             # "" = the base model
  requests @1 :UInt32;          # measured requests that named it
  completed @2 :UInt32;         # of them, successful
  outputThroughput @3 :Float64; # its output tokens over the run's duration, tok/s
  ttftMs @4 :LatencyStats;
  tpotMs @5 :LatencyStats;
}

struct EffectiveSetting {
  name @0 :Text;     # servesweep's, e.g. "prefill_budget_tok"
  value @1 :Text;    # as the engine resolved it ("8192", "off", "n/a: sized from the KV pool")
  process @2 :Text;  # the engine process of the launch ("engine", "decode0")
}

# The validity gate's verdict (record/run_validity.h); results.db and summary.csv store its name:
# "" (not judged), "valid", "invalid", "not reconciled" (results/record_columns.h).
enum Validity {
  notJudged @0;      # the run did not reach the gate (no measured phase)
  valid @1;
  invalid @2;        # every failed check in validityReasons
  notReconciled @3;  # the engine exposes no counter to check against; why in validityReasons
}

# loadgen/early_stop.h StopReason: why a measured phase ended before its full length.
enum StopReason {
  none @0;           # it ran its full length
  stable @1;
  oversaturated @2;
  maxDuration @3;
}

enum RunStatus {
  ok @0;
  failed @1;
  cancelled @2;
  busy @3;       # the agent could not take the assignment (busy); nothing was measured
  refused @4;    # the run's settings cannot run (an invalid argument): recorded with the reason
                 # after one attempt and never retried, since another attempt would fail the same
  skipped @5;    # never run, by the coordinator: a lower level of its load ladder was
                 # over-saturated (the reason in `error`); nothing was measured or spent
}

struct RunResult {
  runId @0 :Text;
  attempt @1 :UInt32;
  agentId @2 :Text;
  status @3 :RunStatus;
  error @4 :Text;
  spec @5 :Spec.RunSpec;
  record @6 :BenchmarkRecord;
  requests @7 :List(RequestRecord);
  engineSamples @8 :List(EngineSample);
  probes @9 :List(ProbeResult);
  startedAtUnixMs @10 :Int64;
  finishedAtUnixMs @11 :Int64;
  engineLogTail @12 :Text;
  agentIds @13 :List(Text);       # every agent of the placement, head first
}
