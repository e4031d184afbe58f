#!/usr/bin/env bash
# GPU-seconds a sweep spends with one engine per configuration against a cold engine per run,
# on the emulator, in the shapes of examples/vllm-vs-sglang.yaml (2 engine configurations x 4
# concurrency levels x 3 repeats = 24 runs) and examples/topology-sweep.yaml (5 layouts x 3
# levels = 15 runs; on one emulated 16-GPU agent, so every layout is one engine).
#
# The emulator's cold start stands for the engine's, scaled by 1/15 like the levels: STARTUP_MS
# (default 6000) for the vllm-vs-sglang shape's 8B model (a minute or two: vllm#20264's log shows
# 59 s to the first answer for a 3.4 GiB model with a warm compile cache), MOE_STARTUP_MS
# (default 10000) for the topology shape's Qwen3-30B-A3B (about 2.5 minutes: 57 GiB of weights
# more to load and a first torch.compile, 19 s for an 8B model in vllm PR 11005). Its fixed
# schedule stands for serving (ttft 20 ms, itl 5 ms, 32 output tokens), with each example's own
# levels and request count (128 for vllm-vs-sglang's 400 scaled down, 300 for topology-sweep's).
# Both lifecycles run one after the other in one invocation (compare the ratio, not the seconds).
# GPU-seconds = each run's GPUs x the sweep's wall seconds while it holds them: with one agent
# running one run at a time, wall seconds x the agent's GPUs. Prints, per shape and lifecycle,
# the wall seconds, GPU-seconds, the ratio, and the largest difference between the two
# lifecycles' per-level TTFT and TPOT medians (the figures must not move); then the same with one
# engine per configuration and early_stop (each level stopped once stable, docs/matrix.md).
#
# Usage: bench/engine_lifecycle.sh [build_dir=build]
# Env: STARTUP_MS (6000), MOE_STARTUP_MS (10000), SHAPES (both), SERVESWEEP (BUILD/servesweep).
set -euo pipefail

BUILD=${1:-build}
STARTUP_MS=${STARTUP_MS:-6000}
MOE_STARTUP_MS=${MOE_STARTUP_MS:-10000}
SERVESWEEP=${SERVESWEEP:-$BUILD/servesweep}
BENCH_NAME=engine_lifecycle
[ -x "$SERVESWEEP" ] || { echo "engine_lifecycle: $SERVESWEEP not built" >&2; exit 1; }
source "$(dirname "$0")/lib.sh"

# matrix NAME LIFECYCLE GPUS REQUESTS AXES [EARLY_STOP]: a sweep of the emulator with this
# lifecycle, requests per level and axes (and the workload's early_stop, when given).
matrix() {
  cat <<YAML
name: $1
engine: sim
model: m
engine_lifecycle: $2
local: {agents: 1, gpus_per_agent: $3}
workload: {input_len: 64, output_len: 32, num_requests: $4, warmup_requests: 8, seed: 7${6:+, early_stop: $6}}
$5
YAML
}
# The third variant: one engine per configuration, and each level stopped once stable after 32
# requests (windows of 8), the rest of its requests not sent.
EARLY_STOP="{stable: {min_requests: 32, window_requests: 8}}"
VLLM_VS_SGLANG="repeats: 3
axes:
  sim: [{ttft_ms: 20, itl_ms: 5, startup_ms: $STARTUP_MS}, {ttft_ms: 18, itl_ms: 6, startup_ms: $STARTUP_MS}]
  concurrency: [1, 16, 64, 128]"
TOPOLOGY="sim: {ttft_ms: 20, itl_ms: 5, startup_ms: $MOE_STARTUP_MS}
axes:
  layout: [{tp: 1}, {tp: 2}, {tp: 4}, {tp: 1, dp: 8}, {tp: 2, dp: 8}]
  concurrency: [8, 64, 256]"

figures() {  # out_dir: "label ttft_median tpot_median" per run, sorted by label
  python3 - "$1/results.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for label, ttft, tpot in db.execute(
        "SELECT runs.label, ttft_median_ms, tpot_median_ms FROM results JOIN runs USING(run_id)"
        " ORDER BY runs.label"):
    print(label, ttft, tpot)
PY
}

compare_figures() {  # a b: the largest relative difference of TTFT and TPOT medians, run by run
  python3 - "$1" "$2" <<'PY'
import sys
def read(path):
    out = {}
    for line in open(path):
        *label, ttft, tpot = line.split()
        out.setdefault(" ".join(label), []).append((float(ttft), float(tpot)))
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
worst, where = 0.0, "-"
for label in a:
    for (ta, pa), (tb, pb) in zip(a[label], b.get(label, [])):
        for metric, x, y in (("TTFT", ta, tb), ("TPOT", pa, pb)):
            if abs(y / x - 1) > worst:
                worst, where = abs(y / x - 1), f"{metric} {x:.2f} -> {y:.2f} ms in {label}"
print(f"{100 * worst:.1f}% ({where})")
PY
}

for shape in ${SHAPES:-vllm-vs-sglang topology-sweep}; do
  if [ "$shape" = vllm-vs-sglang ]; then axes=$VLLM_VS_SGLANG gpus=1 requests=128
  else axes=$TOPOLOGY gpus=16 requests=300; fi
  declare -A wall
  for lifecycle in per_run per_configuration early_stop; do
    if [ "$lifecycle" = early_stop ]; then
      matrix "$shape" per_configuration "$gpus" "$requests" "$axes" "$EARLY_STOP" >"$tmp/$shape-$lifecycle.yaml"
    else
      matrix "$shape" "$lifecycle" "$gpus" "$requests" "$axes" >"$tmp/$shape-$lifecycle.yaml"
    fi
    start=$(date +%s.%N)
    "$SERVESWEEP" run "$tmp/$shape-$lifecycle.yaml" --out "$tmp/$shape-$lifecycle" --progress off \
      >"$tmp/$shape-$lifecycle.log" 2>&1 || { cat "$tmp/$shape-$lifecycle.log" >&2; exit 1; }
    wall[$lifecycle]=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    figures "$tmp/$shape-$lifecycle" >"$tmp/$shape-$lifecycle.figures"
    engines=$(python3 -c "import sqlite3; print(sqlite3.connect('$tmp/$shape-$lifecycle/results.db').execute('SELECT COUNT(DISTINCT engine_id), COUNT(*) FROM results').fetchone())")
    printf '%-15s %-18s wall %7s s  GPU-s %8s  (engines, runs) %s\n' "$shape" "$lifecycle" \
      "${wall[$lifecycle]}" "$(python3 -c "print(f'{${wall[$lifecycle]} * $gpus:.0f}')")" "$engines"
  done
  printf '%-15s per_run / per_configuration GPU-seconds: %sx; largest TTFT/TPOT median difference: %s\n' \
    "$shape" "$(python3 -c "print(f'{${wall[per_run]} / ${wall[per_configuration]}:.2f}')")" \
    "$(compare_figures "$tmp/$shape-per_run.figures" "$tmp/$shape-per_configuration.figures")"
  printf '%-15s per_run / (per_configuration + early stop) GPU-seconds: %sx; largest TTFT/TPOT median difference: %s\n' \
    "$shape" "$(python3 -c "print(f'{${wall[per_run]} / ${wall[early_stop]}:.2f}')")" \
    "$(compare_figures "$tmp/$shape-per_run.figures" "$tmp/$shape-early_stop.figures")"
done
