#!/usr/bin/env bash
# The load generator against nginx serving a static SSE body, beside a vLLM-style Python client,
# wrk and (when installed) vLLM's and SGLang's own benchmark clients, in ONE run on the same
# server; then the instrument checks (loadgen_fidelity): 10,000
# streams held against the emulator, send lateness at 2,000 requests/s open loop, and TTFT/ITL
# agreement with the emulator's own request log.
#
# nginx: ONE worker (the Python clients are one asyncio thread; servesweep runs with one load
# thread, then with two; one worker keeps the server's share of the 2 cores the same for every
# client). It answers every POST with the same
# body: OUTPUT_TOK completion events in vLLM's chunk shape, a usage event and [DONE] (Content-
# Length, keep-alive); under /no-usage the same body without the usage event. Nothing is pinned: client and nginx share the machine's cores, as the
# issue's figures were measured. Each client runs alone against the same nginx, one after the
# other; compare the ratios printed, not absolute figures, on a shared machine.
#
# Usage: bench/loadgen_vs_nginx.sh [build_dir=build] [duration_s=5]
# Env: OUTPUT_TOK (128), CONCURRENCY (64), HOLD_STREAMS (10000), LATE_RATE (2000),
#      SERVESWEEP (the binary; default BUILD/servesweep), PYTHON (/usr/bin/python3, which has
#      Debian's python3-aiohttp from scripts/install-deps.sh).
# The REAL Python clients of issue #3, side by side in the same run, when these point at their
# installs (bench/python_clients_setup.sh makes both venvs and the tokenizer, and prints the
# line): VLLM_BENCH (the `vllm` command), SGLANG_PYTHON (a python with sglang), PY_TOKENIZER
# (the local tokenizer folder; default: `tokenizer` beside the venvs). Each runs twice: closed
# loop at CONCURRENCY (--request-rate inf) and open loop at LATE_RATE requests/s.
set -euo pipefail

BUILD=${1:-build}
DURATION_S=${2:-5}
OUTPUT_TOK=${OUTPUT_TOK:-128}
CONCURRENCY=${CONCURRENCY:-64}
HOLD_STREAMS=${HOLD_STREAMS:-10000}
LATE_RATE=${LATE_RATE:-2000}
SERVESWEEP=${SERVESWEEP:-$BUILD/servesweep}
FIDELITY=${FIDELITY:-$BUILD/bench/loadgen_fidelity}
PYTHON=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)

for tool in wrk nginx curl "$PYTHON"; do
  command -v "$tool" >/dev/null || { echo "loadgen_vs_nginx: $tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done
"$PYTHON" -c 'import aiohttp' 2>/dev/null ||
  { echo "loadgen_vs_nginx: $PYTHON has no aiohttp (scripts/install-deps.sh: python3-aiohttp)" >&2; exit 1; }
for bin in "$SERVESWEEP" "$FIDELITY"; do
  [ -x "$bin" ] || { echo "loadgen_vs_nginx: $bin not built" >&2; exit 1; }
done
VLLM_BENCH=${VLLM_BENCH:-}
SGLANG_PYTHON=${SGLANG_PYTHON:-}
for bin in $VLLM_BENCH $SGLANG_PYTHON; do
  [ -x "$bin" ] || { echo "loadgen_vs_nginx: $bin (VLLM_BENCH / SGLANG_PYTHON) not executable" >&2; exit 1; }
  # A venv's bin/X: the tokenizer that bench/python_clients_setup.sh puts beside the venvs.
  PY_TOKENIZER=${PY_TOKENIZER:-$(dirname "$(dirname "$(dirname "$bin")")")/tokenizer}
done
if [ -n "$VLLM_BENCH$SGLANG_PYTHON" ] && [ ! -f "${PY_TOKENIZER:-}/tokenizer.json" ]; then
  echo "loadgen_vs_nginx: no tokenizer.json in PY_TOKENIZER=${PY_TOKENIZER:-} (bench/python_clients_setup.sh)" >&2
  exit 1
fi
# 10,000 streams need 10,000 sockets on each side.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

BENCH_NAME=loadgen_vs_nginx
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

serve_static_sse "$OUTPUT_TOK"  # sets url and body_bytes

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== nginx (1 worker) serving $OUTPUT_TOK completion events + usage + [DONE] ($body_bytes bytes)" \
  "to every POST; concurrency $CONCURRENCY; client and nginx share the cores"

# Requests per client run: about DURATION_S seconds at the rate each client can reach.
ss_requests=$((20000 * DURATION_S))
py_requests=$((1000 * DURATION_S))

# servesweep with one load thread, then two (--threads: each a libcurl multi with half the
# concurrency); the ratios below are given for both.
for threads in 1 2; do
  "$SERVESWEEP" --log-level warn bench --url "$url" --model m --concurrency "$CONCURRENCY" \
    --threads "$threads" --num-requests $((ss_requests * threads)) \
    --warmup-requests "$CONCURRENCY" --input-len 16 --output-len "$OUTPUT_TOK" \
    >"$tmp/servesweep_$threads.out"
done
ss_value() {  # ss_value THREADS LINE_START
  awk -F: -v line="$2" 'index($0, line) == 1 {gsub(/ /, "", $2); print $2}' "$tmp/servesweep_$1.out"
}
ss_rps=$(ss_value 1 "Request throughput") ss_failed=$(ss_value 1 "Failed requests")
ss2_rps=$(ss_value 2 "Request throughput") ss2_failed=$(ss_value 2 "Failed requests")

"$PYTHON" "$here/vllm_style_client.py" "$url/v1/completions" "$py_requests" "$CONCURRENCY" \
  "$OUTPUT_TOK" >"$tmp/python.out"
py_rps=$(awk '{print $2}' "$tmp/python.out")
py_failed=$(awk '{print $6}' "$tmp/python.out")

cat >"$tmp/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"m","prompt":"hello world","max_tokens":128,"stream":true}'
wrk.headers["Content-Type"] = "application/json"
LUA
wrk -t1 -c"$CONCURRENCY" -d"${DURATION_S}s" -s "$tmp/post.lua" "$url/v1/completions" >"$tmp/wrk.out"
wrk_rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk.out")

# The real clients, their installed packages unmodified. real_client LABEL REQUESTS COMMAND...:
# runs it with the hub off, prints the command, and appends "LABEL|req/s|failed" to
# $tmp/real.rows ("-" for both when it failed; its output's tail is printed).
: >"$tmp/real.rows"
real_client() {
  local label=$1 requests=$2 out
  out="$tmp/real_$(wc -l <"$tmp/real.rows").out"
  shift 2
  echo "== $label: HF_HUB_OFFLINE=1 $*"
  if HF_HUB_OFFLINE=1 "$@" >"$out" 2>&1; then
    local rps ok
    rps=$(awk -F: '/^Request throughput \(req\/s\)/ {gsub(/ /, "", $2); print $2}' "$out")
    ok=$(awk -F: '/^Successful requests/ {gsub(/ /, "", $2); print $2}' "$out")
    echo "$label|$rps|$((requests - ok))" >>"$tmp/real.rows"
  else
    echo "loadgen_vs_nginx: $label failed; the end of its output:" >&2
    tail -n 20 "$out" >&2
    echo "$label|-|-" >>"$tmp/real.rows"
  fi
}
# Closed loop at CONCURRENCY, as the issue's peaks; then open loop (Poisson, no concurrency cap)
# at LATE_RATE, the issue's "achieved rate against a 2,000 requests/s target".
if [ -n "$VLLM_BENCH" ]; then
  for rate in inf "$LATE_RATE"; do
    if [ "$rate" = inf ]; then
      limit=(--max-concurrency "$CONCURRENCY") requests=$py_requests label="vllm bench serve"
    else
      limit=() requests=$((LATE_RATE * DURATION_S / 2)) label="vllm bench serve, open loop $rate/s"
    fi
    real_client "$label" "$requests" "$VLLM_BENCH" bench serve --backend openai \
      --base-url "$url" --endpoint /v1/completions --model m --tokenizer "$PY_TOKENIZER" \
      --dataset-name random --random-input-len 16 --random-output-len "$OUTPUT_TOK" \
      --ignore-eos --num-prompts "$requests" --request-rate "$rate" "${limit[@]}"
  done
else
  echo "== vllm bench serve: skipped (set VLLM_BENCH=VENVS/vllm/bin/vllm; bench/python_clients_setup.sh)"
fi
if [ -n "$SGLANG_PYTHON" ]; then
  for rate in inf "$LATE_RATE"; do
    if [ "$rate" = inf ]; then
      limit=(--max-concurrency "$CONCURRENCY") requests=$py_requests label="sglang bench_serving"
    else
      limit=() requests=$((LATE_RATE * DURATION_S / 2)) label="sglang bench_serving, open loop $rate/s"
    fi
    # random-ids: random token ids (random samples ShareGPT, a download). --output-file: its
    # result line goes to the scratch folder, not a BACKEND_DATE_N_IN_OUT.jsonl in the cwd.
    real_client "$label" "$requests" "$SGLANG_PYTHON" -m sglang.bench_serving --backend vllm \
      --base-url "$url/no-usage" --model m --tokenizer "$PY_TOKENIZER" --dataset-name random-ids \
      --random-input-len 16 --random-output-len "$OUTPUT_TOK" --random-range-ratio 1 \
      --num-prompts "$requests" --request-rate "$rate" "${limit[@]}" \
      --output-file "$tmp/sglang_$rate.jsonl"
  done
else
  echo "== sglang bench_serving: skipped (set SGLANG_PYTHON=VENVS/sglang/bin/python; bench/python_clients_setup.sh)"
fi

row() { printf "%-48s %12s %8s %18s %18s\n" "$@"; }
# ratio A B [DIGITS]: A / B as "9.3x" ("-" when B is "-").
ratio() {
  "$PYTHON" -c "import sys; a, b = sys.argv[1:3]; d = int(sys.argv[3]) if len(sys.argv) > 3 else 1
print(f'{float(a) / float(b):.{d}f}x' if '-' not in (a, b) else '-')" "$@"
}
row client "requests/s" failed "servesweep 1 thr / it" "servesweep 2 thr / it"
row "servesweep bench (libcurl multi, 1 thread)" "$(printf %.0f "$ss_rps")" "$ss_failed" "-" "-"
row "servesweep bench --threads 2" "$(printf %.0f "$ss2_rps")" "$ss2_failed" "-" "-"
while IFS='|' read -r label rps failed; do
  shown=$rps
  [ "$rps" = - ] || shown=$(printf %.0f "$rps")
  if [[ $label == *"open loop"* ]]; then  # against its target, not servesweep's closed loop
    row "$label" "$shown" "$failed" "$(ratio "$rps" "$LATE_RATE" 2) of target" "-"
  else
    row "$label" "$shown" "$failed" "$(ratio "$ss_rps" "$rps")" "$(ratio "$ss2_rps" "$rps")"
  fi
done <"$tmp/real.rows"
row "vLLM-style Python client (aiohttp)" "$(printf %.0f "$py_rps")" "$py_failed" \
  "$(ratio "$ss_rps" "$py_rps")" "$(ratio "$ss2_rps" "$py_rps")"
row "wrk -t1 (no SSE parsing: the ceiling)" "$(printf %.0f "$wrk_rps")" "-" \
  "$(ratio "$ss_rps" "$wrk_rps" 2)" "$(ratio "$ss2_rps" "$wrk_rps" 2)"
echo "== clients done, $(date -u '+%H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== send lateness, open loop at $LATE_RATE requests/s (Poisson) against the same nginx"
"$FIDELITY" lateness "$url" "$LATE_RATE" $((LATE_RATE * DURATION_S)) "$OUTPUT_TOK"

# The emulator for streams held and for agreement with its own timestamps.
sim_port=$(free_port)
"$SERVESWEEP" --log-level warn sim --port "$sim_port" --model m --ttft-ms 0 --itl-ms 1000 &
pids+=($!)
wait_ready "http://127.0.0.1:$sim_port/health"
echo "== $HOLD_STREAMS streams held against the emulator (8 tokens, 1 s apart: about 8 s each)"
"$FIDELITY" hold "http://127.0.0.1:$sim_port" "$HOLD_STREAMS" 8

# agree_run LABEL PREFIX...: a fresh emulator with a request log, the client against it; both
# under PREFIX (e.g. `chrt -f 50`, so that other tenants' load on a shared machine stays out of
# the figures).
agree_run() {
  local label=$1
  shift
  local port log
  port=$(free_port)
  log="$tmp/sim_requests_$port.jsonl"
  "$@" "$SERVESWEEP" --log-level warn sim --port "$port" --model m --ttft-ms 20 --itl-ms 5 \
    --request-log "$log" &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port/health"
  for concurrency in 1 16; do
    echo "== TTFT / ITL against the emulator's request log (ttft 20 ms, itl 5 ms), $label"
    "$@" "$FIDELITY" agree "http://127.0.0.1:$port" "$log" $((concurrency == 1 ? 100 : 400)) \
      "$concurrency" 32
    : >"$log"
  done
}
agree_run "normal priority" env
if chrt -f 50 true 2>/dev/null; then agree_run "client and emulator under chrt -f 50" chrt -f 50; fi
