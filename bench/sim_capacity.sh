#!/usr/bin/env bash
# Capacity of the emulator on ONE core, beside nginx serving a static body of the same size.
#
# The server (sim, then nginx with one worker) is pinned to SERVER_CPU with taskset, wrk
# (WRK_THREADS threads, CONNECTIONS keep-alive connections) to CLIENT_CPU. Every request is the
# same streaming completion (OUTPUT_TOK tokens, ttft = itl = 0, include_usage); nginx answers the
# same POST with the sim's response body captured beforehand (same bytes, Content-Length instead
# of chunked).
# Prints requests/s, server CPU per request and the sim/nginx ratio. Both run in one invocation
# so the ratio is measured under the same noise; compare ratios, not absolute figures.
#
# Usage: bench/sim_capacity.sh [build_dir=build] [duration_s=10] [connections=64] [output_tok=4]
# Env: SERVER_CPU (0), CLIENT_CPU (1; a taskset list such as 2-5), WRK_THREADS (1), SIM_ARGS
# (extra `servesweep sim` flags), SERVESWEEP (the binary; default BUILD/servesweep).
set -euo pipefail

BUILD=${1:-build}
DURATION_S=${2:-10}
CONNECTIONS=${3:-64}
OUTPUT_TOK=${4:-4}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
WRK_THREADS=${WRK_THREADS:-1}
SERVESWEEP=${SERVESWEEP:-$BUILD/servesweep}

for tool in wrk nginx taskset curl python3; do
  command -v "$tool" >/dev/null || { echo "sim_capacity: $tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$SERVESWEEP" ] || { echo "sim_capacity: $SERVESWEEP not built" >&2; exit 1; }

BENCH_NAME=sim_capacity
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
cpu_ticks() {  # pid -> utime + stime in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat"
}

body="{\"model\":\"m\",\"prompt\":\"hello world\",\"max_tokens\":$OUTPUT_TOK,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
cat >"$tmp/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
EOF

# run_wrk NAME PID URL: drives the server, prints one result line.
run_wrk() {
  local name=$1 pid=$2 url=$3
  taskset -c "$CLIENT_CPU" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d1s -s "$tmp/post.lua" "$url" >/dev/null  # warm-up
  local before after
  before=$(cpu_ticks "$pid")
  taskset -c "$CLIENT_CPU" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION_S}s" -s "$tmp/post.lua" "$url" \
    >"$tmp/$name.out"
  after=$(cpu_ticks "$pid")
  if grep -q "Non-2xx" "$tmp/$name.out"; then
    echo "sim_capacity: $name answered errors:" >&2
    cat "$tmp/$name.out" >&2
    exit 1
  fi
  local rps
  rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/$name.out")
  local hz
  hz=$(getconf CLK_TCK)
  python3 - "$name" "$rps" "$before" "$after" "$hz" "$DURATION_S" <<'EOF'
import sys
name, rps, before, after, hz, dur = sys.argv[1], float(sys.argv[2]), *map(float, sys.argv[3:])
cpu_s = (after - before) / hz
print(f"{name:>6} {rps:>12,.0f} {cpu_s / dur:>10.2f} {cpu_s / (rps * dur) * 1e6:>14.1f}")
EOF
  echo "$rps" >"$tmp/$name.rps"
}

# The emulator, pinned.
sim_port=$(free_port)
# shellcheck disable=SC2086
taskset -c "$SERVER_CPU" "$SERVESWEEP" --log-level warn sim --port "$sim_port" --model m \
  --ttft-ms 0 --itl-ms 0 ${SIM_ARGS:-} &
pids+=($!)
sim_pid=$!
wait_ready "http://127.0.0.1:$sim_port/health"

# The sim's de-chunked response body is nginx's static body.
curl -sf -X POST -H 'Content-Type: application/json' -d "$body" \
  "http://127.0.0.1:$sim_port/v1/completions" >"$tmp/body.sse"
body_bytes=$(stat -c %s "$tmp/body.sse")
python3 - "$tmp/body.sse" "$tmp/body.conf" <<'EOF'
import sys
text = open(sys.argv[1]).read()
escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
open(sys.argv[2], "w").write(f"return 200 '{escaped}';\n")
EOF

nginx_port=$(free_port)
write_nginx_conf "$nginx_port" 4096 "" '      default_type "text/event-stream; charset=utf-8";
      include '"$tmp"'/body.conf;'
taskset -c "$SERVER_CPU" nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log" &
pids+=($!)
nginx_pid=$!
wait_ready "http://127.0.0.1:$nginx_port/"
# The master only forks; the worker serves.
nginx_worker=$(pgrep -P "$nginx_pid" | head -1)

echo "one server core (cpu $SERVER_CPU), wrk -t$WRK_THREADS -c$CONNECTIONS on cpu $CLIENT_CPU," \
  "${DURATION_S}s; $OUTPUT_TOK-token streamed completions, $body_bytes-byte body"
printf "%6s %12s %10s %14s\n" server "requests/s" "cores" "CPU us/request"
run_wrk sim "$sim_pid" "http://127.0.0.1:$sim_port/v1/completions"
run_wrk nginx "$nginx_worker" "http://127.0.0.1:$nginx_port/v1/completions"
python3 -c "import sys; print(f'sim/nginx: {float(sys.argv[1]) / float(sys.argv[2]):.2f}')" \
  "$(cat "$tmp/sim.rps")" "$(cat "$tmp/nginx.rps")"
