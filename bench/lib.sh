# Shared by the bench/ scripts that start servers: a scratch folder and the processes started,
# both cleaned up on exit, a free loopback port, waiting for a URL, and nginx with one worker.
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
