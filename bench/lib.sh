# Shared by the bench/ scripts that start servers: a scratch folder and the processes started,
# both cleaned up on exit, a free loopback port, waiting for a URL, and nginx with one worker
# (serving a static SSE body: serve_static_sse).
# Source it after setting BENCH_NAME (used in messages).

tmp=$(mktemp -d)
chmod 755 "$tmp"  # nginx workers (another user) read files under it
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_ready() {  # url
  for _ in $(seq 500); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.02
  done
  echo "$BENCH_NAME: $1 never answered" >&2
  exit 1
}

# write_nginx_conf PORT WORKER_CONNECTIONS LISTEN_OPTIONS LOCATION_BODY: one worker, keep-alive
# without a request limit, no access log, every temp path under $tmp/nginx; the config is
# $tmp/nginx/nginx.conf.
write_nginx_conf() {
  local port=$1 connections=$2 listen_options=$3 location=$4
  mkdir -p "$tmp/nginx"
  cat >"$tmp/nginx/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile 65536;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections $connections; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port$listen_options;
    location / {
$location
    }
  }
}
CONF
}

# serve_static_sse OUTPUT_TOK: nginx (one worker) answering every POST with the same body:
# OUTPUT_TOK completion events in vLLM's chunk shape, a usage event and [DONE] (Content-Length,
# keep-alive); under /no-usage the same body without the usage event. Sets url and body_bytes.
serve_static_sse() {
  # The body as a file nginx serves at /v1/completions (too long for `return 200 '...'`: nginx
  # caps a config token at 4 KB).
  mkdir -p "$tmp/www/v1"
  python3 - "$1" "$tmp/www/v1/completions" <<'PY'
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
  # The same body without the usage event, under the prefix /no-usage: a vLLM server sends that
  # event (choices: []) only when the request asks for it (stream_options.include_usage), which
  # SGLang's completions client does not, and that client fails on it (choices[0] of []).
  mkdir -p "$tmp/www/no-usage/v1"
  sed '/"choices":\[\],"usage"/,+1d' "$tmp/www/v1/completions" >"$tmp/www/no-usage/v1/completions"
  # sglang.bench_serving waits for GET /v1/models to answer 200 before it starts.
  echo '{"object":"list","data":[{"id":"m","object":"model"}]}' |
    tee "$tmp/www/v1/models" >"$tmp/www/no-usage/v1/models"

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
}
