#!/usr/bin/env bash
# The load generator against nginx serving a static SSE body, beside a vLLM-style Python client
# and wrk, in ONE run on the same server; then the instrument checks (loadgen_fidelity): 10,000
# streams held against the emulator, send lateness at 2,000 requests/s open loop, and TTFT/ITL
# agreement with the emulator's own request log.
#
# nginx: ONE worker (the clients under test are single-threaded too; one worker keeps the
# server's share of the 2 cores the same for every client). It answers every POST with the same
# body: OUTPUT_TOK completion events in vLLM's chunk shape, a usage event and [DONE] (Content-
# Length, keep-alive). Nothing is pinned: client and nginx share the machine's cores, as the
# issue's figures were measured. Each client runs alone against the same nginx, one after the
# other; compare the ratios printed, not absolute figures, on a shared machine.
#
# Usage: bench/loadgen_vs_nginx.sh [build_dir=build] [duration_s=5]
# Env: OUTPUT_TOK (128), CONCURRENCY (64), HOLD_STREAMS (10000), LATE_RATE (2000),
#      SERVESWEEP (the binary; default BUILD/servesweep), PYTHON (/usr/bin/python3, which has
#      Debian's python3-aiohttp from scripts/install-deps.sh).
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
# 10,000 streams need 10,000 sockets on each side.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

BENCH_NAME=loadgen_vs_nginx
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

# The static body, as the file nginx serves at /v1/completions (too long for `return 200 '...'`:
# nginx caps a config token at 4 KB).
mkdir -p "$tmp/www/v1"
"$PYTHON" - "$OUTPUT_TOK" "$tmp/www/v1/completions" <<'PY'
import json, sys
n, raw = int(sys.argv[1]), sys.argv[2]
events = []
for i in range(n):
    events.append({"id": "cmpl-0123456789abcdef", "object": "text_completion", "created": 1764460800,
                   "model": "m", "choices": [{"index": 0, "text": f" tok{i}", "logprobs": None,
                   "finish_reason": "length" if i == n - 1 else None, "stop_reason": None}]})
events.append({"id": "cmpl-0123456789abcdef", "object": "text_completion", "created": 1764460800,
               "model": "m", "choices": [],
               "usage": {"prompt_tokens": 16, "total_tokens": 16 + n, "completion_tokens": n}})
text = "".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events) + "data: [DONE]\n\n"
open(raw, "w").write(text)
PY
body_bytes=$(stat -c %s "$tmp/www/v1/completions")

nginx_port=$(free_port)
# A POST to a static file is answered 405; error_page turns that into the file, served as to a
# GET (the request body is read and discarded; the connection stays open).
write_nginx_conf "$nginx_port" 20000 " backlog=4096" '      root '"$tmp"'/www;
      default_type "text/event-stream; charset=utf-8";
      open_file_cache max=16;
      error_page 405 =200 $uri;'
nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log" &
pids+=($!)
url="http://127.0.0.1:$nginx_port"
wait_ready "$url/v1/completions"

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== nginx (1 worker) serving $OUTPUT_TOK completion events + usage + [DONE] ($body_bytes bytes)" \
  "to every POST; concurrency $CONCURRENCY; client and nginx share the cores"

# Requests per client run: about DURATION_S seconds at the rate each client can reach.
ss_requests=$((20000 * DURATION_S))
py_requests=$((1000 * DURATION_S))

"$SERVESWEEP" --log-level warn bench --url "$url" --model m --concurrency "$CONCURRENCY" \
  --num-requests "$ss_requests" --warmup-requests "$CONCURRENCY" --input-len 16 \
  --output-len "$OUTPUT_TOK" >"$tmp/servesweep.out"
ss_rps=$(awk -F: '/Request throughput/ {gsub(/ /, "", $2); print $2}' "$tmp/servesweep.out")
ss_failed=$(awk -F: '/Failed requests/ {gsub(/ /, "", $2); print $2}' "$tmp/servesweep.out")

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

printf "%-44s %12s %8s\n" client "requests/s" failed
printf "%-44s %12.0f %8s\n" "servesweep bench (libcurl multi, 1 thread)" "$ss_rps" "$ss_failed"
printf "%-44s %12.0f %8s\n" "vLLM-style Python client (aiohttp)" "$py_rps" "$py_failed"
printf "%-44s %12.0f %8s\n" "wrk -t1 (no SSE parsing: the ceiling)" "$wrk_rps" "-"
"$PYTHON" -c "import sys; s, p, w = map(float, sys.argv[1:]); print(f'servesweep / Python: {s / p:.1f}x   servesweep / wrk: {s / w:.2f}')" \
  "$ss_rps" "$py_rps" "$wrk_rps"

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
