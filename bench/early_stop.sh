#!/usr/bin/env bash
# Early stop on the emulator (the performance model: Llama-3.1-8B on an H200, at most 16
# sequences a batch), with the default rules (docs/matrix.md#early-stop), each sweep run twice:
# with early_stop and without, one after the other.
#
# 1. stable: closed loops at concurrency 4 and 16 of up to 2,000 requests, early_stop stable with
#    min_requests 200: the measured requests per run (the bar: within 20% of 200), the wall
#    seconds, and the TTFT/TPOT medians against the same levels run to 600 requests without it.
# 2. ladder: request_rate at about 0.5x, 0.8x, 2x and 4x the capacity measured by the 16-slot
#    closed loop, 40 s of arrivals each, early_stop oversaturated: which level stopped, after how many
#    measured seconds (the bar: within 30 s), the levels skipped, and the GPU-seconds of the
#    whole ladder against running every level to its length.
#
# Usage: bench/early_stop.sh [build_dir=build]
set -euo pipefail

BUILD=${1:-build}
SERVESWEEP=${SERVESWEEP:-$BUILD/servesweep}
BENCH_NAME=early_stop
[ -x "$SERVESWEEP" ] || { echo "early_stop: $SERVESWEEP not built" >&2; exit 1; }
source "$(dirname "$0")/lib.sh"

head_yaml() {
  cat <<YAML
name: $1
engine: sim
model: meta-llama/Llama-3.1-8B-Instruct
sim: {hardware: h200, model_profile: llama-3.1-8b, startup_ms: 100}
engine_config: {max_num_seqs: 16}
local: {agents: 1, gpus_per_agent: 1}
YAML
}

sweep() {  # name yaml: runs it, prints its wall seconds
  local start
  start=$(date +%s.%N)
  "$SERVESWEEP" run "$2" --out "$tmp/$1" --progress off >"$tmp/$1.log" 2>&1 || {
    cat "$tmp/$1.log" >&2
    exit 1
  }
  python3 -c "import time; print(f'{time.time() - $start:.1f}')"
}

query() {  # name sql
  python3 - "$tmp/$1/results.db" "$2" <<'PY'
import sqlite3, sys
for row in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]):
    print(" ".join("" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v)) for v in row))
PY
}

# 1. stable
{
  head_yaml stable
  cat <<'YAML'
workload:
  input_len: 256
  output_len: 64
  num_requests: 2000
  warmup_requests: 16
  seed: 3
  early_stop: {stable: {min_requests: 200}}
axes:
  concurrency: [4, 16]
YAML
} >"$tmp/stable.yaml"
sed -e 's/num_requests: 2000/num_requests: 600/' -e '/early_stop/d' -e 's/^name: stable/name: full/' \
  "$tmp/stable.yaml" >"$tmp/full.yaml"
echo "== stable (min_requests 200, default windows 3 x 32, tolerance 5%)"
wall_stable=$(sweep stable "$tmp/stable.yaml")
wall_full=$(sweep full "$tmp/full.yaml")
echo "concurrency stopped completed stopped_at_s ttft_p50_ms tpot_p50_ms | full run: completed ttft_p50_ms tpot_p50_ms"
paste -d' ' \
  <(query stable "SELECT concurrency, stopped, completed, stopped_at_s, ttft_median_ms, tpot_median_ms FROM results ORDER BY concurrency") \
  <(query full "SELECT '|', completed, ttft_median_ms, tpot_median_ms FROM results ORDER BY concurrency")
echo "wall: early stop ${wall_stable} s (up to 2,000 requests a level), full ${wall_full} s (600 a level)"
capacity=$(query full "SELECT request_throughput FROM results WHERE concurrency = 16")
echo "capacity (16 slots): ${capacity} req/s"

# 2. ladder
rates=$(python3 -c "c = $capacity; print(', '.join(f'{c * f:.2f}' for f in (0.5, 0.8, 2, 4)))")
# Each level 40 s of arrivals, as a ladder of fixed-length levels would be.
counts=$(python3 -c "c = $capacity; print(', '.join(str(round(c * f * 40)) for f in (0.5, 0.8, 2, 4)))")
{
  head_yaml ladder
  cat <<YAML
workload:
  input_len: 256
  output_len: 64
  seed: 3
  early_stop: {oversaturated: true}
zip:
  - request_rate: [$rates]
    num_requests: [$counts]
YAML
} >"$tmp/ladder.yaml"
sed -e '/early_stop/d' -e 's/^name: ladder/name: ladder_full/' "$tmp/ladder.yaml" >"$tmp/ladder_full.yaml"
echo
echo "== ladder (request_rate ${rates}; oversaturated: min_s 10, window_s 30, min_growth 0.1)"
wall_ladder=$(sweep ladder "$tmp/ladder.yaml")
wall_ladder_full=$(sweep ladder_full "$tmp/ladder_full.yaml")
echo "level status stopped stopped_at_s sent duration_s"
query ladder "SELECT runs.label, runs.status, r.stopped, r.stopped_at_s, r.completed + r.failed, r.duration_s FROM runs LEFT JOIN results r USING(run_id) ORDER BY runs.idx"
echo "without early stop:"
query ladder_full "SELECT request_rate_per_s, completed, duration_s, ttft_median_ms FROM results ORDER BY request_rate_per_s"
echo "GPU-seconds (1 GPU, wall): early stop ${wall_ladder} s, every level to its length ${wall_ladder_full} s: $(python3 -c "print(f'{$wall_ladder_full / $wall_ladder:.2f}')")x"
