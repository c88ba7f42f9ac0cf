# nginx as the comparison proxy of bench/proxy-compare.sh and scripts/dev/gateway-request-cost.sh
# (sourced, bash, after scripts/lib/processes.sh): a plain keep-alive reverse proxy, 2 workers,
# upstream keep-alive 1024, no access log.
#   start_nginx PORT UPSTREAM_HOST:PORT
#              writes $WORK/nginx/nginx.conf, starts nginx in the background (added to PIDS,
#              cleaned up on exit) and sets NGINX_PID; the caller waits for PORT.
start_nginx() {
  local port="$1" upstream="$2"
  mkdir -p "$WORK/nginx/logs"
  cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes 2;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  upstream ms { server $upstream; keepalive 1024; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$port backlog=4096;
    keepalive_requests 1000000;
    location / {
      proxy_pass http://ms;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
  "${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" \
    >"$WORK/nginx.out" 2>&1 &
  PIDS+=($!)
  NGINX_PID=$!
}
