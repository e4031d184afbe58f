#!/usr/bin/env bash
# The load generator's speed bar (issue #27): servesweep with 1 and 2 load threads beside the real
# `vllm bench serve` (and sglang.bench_serving when given), closed loop at CONCURRENCY against the
# same nginx worker serving a static stream (bench/lib.sh serve_static_sse), ROUNDS times with
# the clients alternating within each round, so that every ratio compares runs a minute apart
# on the same machine. Prints each round, the median of each client's rate, the median of the
# per-round ratios, and the spread of each servesweep rate over the rounds ((max - min) /
# median). bench/loadgen_vs_nginx.sh has the wider comparison (wrk, aiohttp, open loops) and the
# fidelity checks.
#
# Usage: bench/loadgen_speed.sh [build_dir=build] [duration_s=5]
# Env: ROUNDS (3), OUTPUT_TOK (128), CONCURRENCY (64), SERVESWEEP (BUILD/servesweep),
#      VLLM_BENCH (the `vllm` command: required), SGLANG_PYTHON (optional), PY_TOKENIZER (the
#      tokenizer folder of bench/python_clients_setup.sh; default: `tokenizer` beside the venvs),
#      PIN (1: each servesweep load thread on its own core, --pin-threads; default 0).
set -euo pipefail

BUILD=${1:-build}
DURATION_S=${2:-5}
ROUNDS=${ROUNDS:-3}
OUTPUT_TOK=${OUTPUT_TOK:-128}
CONCURRENCY=${CONCURRENCY:-64}
SERVESWEEP=${SERVESWEEP:-$BUILD/servesweep}
VLLM_BENCH=${VLLM_BENCH:-}
SGLANG_PYTHON=${SGLANG_PYTHON:-}
PIN=${PIN:-0}

[ -x "$SERVESWEEP" ] || { echo "loadgen_speed: $SERVESWEEP not built" >&2; exit 1; }
[ -x "$VLLM_BENCH" ] ||
  { echo "loadgen_speed: VLLM_BENCH='$VLLM_BENCH' is not the vllm command (bench/python_clients_setup.sh)" >&2; exit 1; }
PY_TOKENIZER=${PY_TOKENIZER:-$(dirname "$(dirname "$(dirname "$VLLM_BENCH")")")/tokenizer}
[ -f "$PY_TOKENIZER/tokenizer.json" ] ||
  { echo "loadgen_speed: no tokenizer.json in PY_TOKENIZER=$PY_TOKENIZER (bench/python_clients_setup.sh)" >&2; exit 1; }
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

BENCH_NAME=loadgen_speed
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
serve_static_sse "$OUTPUT_TOK"

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== nginx (1 worker), $OUTPUT_TOK events + usage + [DONE] ($body_bytes bytes) per POST;" \
  "concurrency $CONCURRENCY; $ROUNDS rounds; pinned load threads: $PIN"

ss_requests=$((20000 * DURATION_S))
py_requests=$((1000 * DURATION_S))
pin_flag=()
[ "$PIN" = 1 ] && pin_flag=(--pin-threads)

# field FILE LINE_START: the value after the colon of the line starting with LINE_START.
field() { awk -F: -v line="$2" 'index($0, line) == 1 {gsub(/ /, "", $2); print $2}' "$1"; }

: >"$tmp/rates"  # round client req/s
for round in $(seq "$ROUNDS"); do
  for threads in 1 2; do
    out="$tmp/ss_${threads}_$round.out"
    "$SERVESWEEP" --log-level warn bench --url "$url" --model m --concurrency "$CONCURRENCY" \
      --threads "$threads" "${pin_flag[@]}" --num-requests $((ss_requests * threads)) \
      --warmup-requests "$CONCURRENCY" --input-len 16 --output-len "$OUTPUT_TOK" >"$out"
    [ "$(field "$out" "Failed requests")" = 0 ] || { cat "$out" >&2; exit 1; }
    echo "$round ss$threads $(field "$out" "Request throughput")" >>"$tmp/rates"
  done
  out="$tmp/vllm_$round.out"
  HF_HUB_OFFLINE=1 "$VLLM_BENCH" bench serve --backend openai --base-url "$url" \
    --endpoint /v1/completions --model m --tokenizer "$PY_TOKENIZER" --dataset-name random \
    --random-input-len 16 --random-output-len "$OUTPUT_TOK" --ignore-eos \
    --num-prompts "$py_requests" --request-rate inf --max-concurrency "$CONCURRENCY" \
    >"$out" 2>&1 || { tail -n 20 "$out" >&2; exit 1; }
  echo "$round vllm $(field "$out" "Request throughput (req/s)")" >>"$tmp/rates"
  if [ -n "$SGLANG_PYTHON" ]; then
    out="$tmp/sglang_$round.out"
    HF_HUB_OFFLINE=1 "$SGLANG_PYTHON" -m sglang.bench_serving --backend vllm \
      --base-url "$url/no-usage" --model m --tokenizer "$PY_TOKENIZER" --dataset-name random-ids \
      --random-input-len 16 --random-output-len "$OUTPUT_TOK" --random-range-ratio 1 \
      --num-prompts "$py_requests" --request-rate inf --max-concurrency "$CONCURRENCY" \
      --output-file "$tmp/sglang_$round.jsonl" >"$out" 2>&1 || { tail -n 20 "$out" >&2; exit 1; }
    echo "$round sglang $(field "$out" "Request throughput (req/s)")" >>"$tmp/rates"
  fi
  echo "round $round: $(awk -v r="$round" '$1 == r {printf "%s %.0f  ", $2, $3}' "$tmp/rates")"
done

python3 - "$tmp/rates" <<'PY'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    rnd, client, rps = line.split()
    rates.setdefault(client, {})[int(rnd)] = float(rps)
peers = [p for p in ("vllm", "sglang") if p in rates]
print(f"{'client':<12} {'median req/s':>12} {'spread':>8}  " + "  ".join(f"x{p} (median of rounds)" for p in peers))
for client, by_round in rates.items():
    values = list(by_round.values())
    med = statistics.median(values)
    spread = (max(values) - min(values)) / med
    cols = []
    if client.startswith("ss"):
        for p in peers:
            ratios = [by_round[r] / rates[p][r] for r in by_round if r in rates[p]]
            cols.append(f"{statistics.median(ratios):.1f}x ({', '.join(f'{x:.1f}' for x in ratios)})")
    print(f"{client:<12} {med:>12.0f} {spread:>7.0%}  " + "  ".join(cols))
PY
