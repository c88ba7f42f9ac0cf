#!/usr/bin/env bash
# The gateway's cost beside the reverse proxies people know: nginx and HAProxy (Debian packages
# nginx-light or nginx, haproxy) as plain keep-alive reverse proxies, the blind relay
# (bench/proxy_floor.cpp) and holdback-gateway, each in front of the same fast fake model server
# (1 ms tokens, 4 tokens, 1024 slots) in the same run, everything on the same cores. Per client
# count (keep-alive hey clients, closed loop, -z SECONDS_EACH): throughput, p50 and p99, the
# latency each adds over the server alone, and the proxy's CPU per request (user + system, all its
# processes; and its user and system parts, each the median of the runs). Each proxy gets two
# workers/threads, like the gateway's default --threads 2.
# Admission is wide open (the server's 1024 slots configured), so the gateway's figures are its
# proxying plus holdback's per-request bookkeeping, not queueing.
#
#   bench/proxy-compare.sh [BUILD_DIR] [RUNS]      (default: build/default, 3 runs, medians)
# Environment: CLIENTS (default "1 64 1000"), SECONDS_EACH (default 5), TARGETS (default
# "direct nginx floor haproxy gateway"; one missing binary is skipped with a message).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build/default}"
RUNS="${2:-3}"
GATEWAY="$BUILD/examples/gateway/holdback-gateway"
MODEL_SERVER="$BUILD/examples/model-server/holdback-model-server"
PROXY_FLOOR="$BUILD/bench/holdback-proxy-floor"
SECONDS_EACH="${SECONDS_EACH:-5}"
command -v hey >/dev/null || { echo "hey not installed (apt-get install hey)"; exit 1; }
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
HAPROXY="$(command -v haproxy || echo /usr/sbin/haproxy)"
. scripts/lib/processes.sh  # WORK, cleanup on exit, start VAR NAME CMD...
. scripts/lib/nginx.sh      # start_nginx PORT UPSTREAM
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# cpu_ticks PID: "user system" ticks of PID and its children processes (nginx's workers)
cpu_ticks() {
  local user=0 sys=0 p u s
  for p in "$1" $(pgrep -P "$1" 2>/dev/null); do
    read -r u s < <(awk '{print $14, $15}' "/proc/$p/stat" 2>/dev/null || echo 0 0)
    user=$((user + u)) sys=$((sys + s))
  done
  echo "$user $sys"
}

start MS model-server "$MODEL_SERVER" --port 0 --slots 1024 --token-ms 1 --prefill-ms 0 \
  --model fake-model
MS_HOSTPORT="${MS#http://}"
TARGETS="${TARGETS:-direct nginx floor haproxy gateway}"  # nginx first: the ratios' base
declare -A URL PID
URL[direct]="$MS"
PID[direct]="$MS_PID"
for t in $TARGETS; do
  case "$t" in
    floor)
      if [ -x "$PROXY_FLOOR" ]; then
        start FL floor "$PROXY_FLOOR" --upstream "$MS_HOSTPORT"
        URL[floor]="$FL" PID[floor]="$FL_PID"
      else echo "skipping floor: $PROXY_FLOOR not built (target holdback_proxy_floor)"; fi ;;
    nginx)
      if [ -x "$NGINX" ]; then
        port=$(free_port)
        start_nginx "$port" "$MS_HOSTPORT"
        PID[nginx]=$NGINX_PID
        wait_port "$port" || { echo "nginx did not start"; cat "$WORK/nginx.out"; exit 1; }
        URL[nginx]="http://127.0.0.1:$port"
      else echo "skipping nginx: not installed (apt-get install nginx-light)"; fi ;;
    haproxy)
      if [ -x "$HAPROXY" ]; then
        port=$(free_port)
        cat >"$WORK/haproxy.cfg" <<EOF
global
  nbthread 2
  maxconn 8000
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
frontend fe
  bind 127.0.0.1:$port
  default_backend be
backend be
  http-reuse always
  server ms $MS_HOSTPORT
EOF
        "$HAPROXY" -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.out" 2>&1 &
        PIDS+=($!)
        PID[haproxy]=$!
        wait_port "$port" || { echo "haproxy did not start"; cat "$WORK/haproxy.out"; exit 1; }
        URL[haproxy]="http://127.0.0.1:$port"
      else echo "skipping haproxy: not installed (apt-get install haproxy)"; fi ;;
    gateway)
      start GW gateway "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 --config scripts/dev/open-admission.yaml
      URL[gateway]="$GW" PID[gateway]="$GW_PID" ;;
  esac
done
BODY='{"model":"fake-model","prompt":"hi","max_tokens":4}'
for t in "${!URL[@]}"; do  # warm-up: connections, pools
  hey -z 1s -c 16 -m POST -T application/json -d "$BODY" "${URL[$t]}/v1/completions" >/dev/null 2>&1
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
hz=$(getconf CLK_TCK)
echo "== keep-alive hey clients, -z ${SECONDS_EACH}s, $RUNS runs, medians; CPU: the proxy's own" \
  "(load average $(cut -d' ' -f1-3 /proc/loadavg))"
printf "%-8s %-8s %9s %9s %9s  %-22s %-15s %s\n" clients target "req/s" "p50 ms" "p99 ms" \
  "added p50 / p99 ms" "user / sys us" "CPU us/request (x nginx)"
for c in ${CLIENTS:-1 64 1000}; do
  nginx_cpu=""
  for t in direct $(printf "%s\n" $TARGETS | grep -vx direct); do
    [ -n "${URL[$t]:-}" ] || continue
    : >"$WORK/$t.runs"
    for _ in $(seq "$RUNS"); do
      read -r user0 sys0 < <(cpu_ticks "${PID[$t]}")
      hey -z "${SECONDS_EACH}s" -c "$c" -m POST -T application/json -d "$BODY" \
        "${URL[$t]}/v1/completions" >"$WORK/hey.txt" 2>&1
      read -r user1 sys1 < <(cpu_ticks "${PID[$t]}")
      awk -v user=$((user1 - user0)) -v sys=$((sys1 - sys0)) -v hz="$hz" '
        /Requests\/sec/ {rps=$2} /50% in/ {p50=$3*1000} /99% in/ {p99=$3*1000}
        $1 == "[200]" {n=$2}
        END {
          us = (n > 0 ? 1e6 / hz / n : 0)
          printf "%.0f %.2f %.2f %.1f %.1f %.1f\n", rps, p50, p99, us * (user + sys), us * user, us * sys
        }' "$WORK/hey.txt" >>"$WORK/$t.runs"
      grep -q 'Error distribution' "$WORK/hey.txt" && { echo "  $t: transport errors:"; grep -A3 'Error distribution' "$WORK/hey.txt"; }
    done
    rps=$(cut -d' ' -f1 "$WORK/$t.runs" | median)
    p50=$(cut -d' ' -f2 "$WORK/$t.runs" | median)
    p99=$(cut -d' ' -f3 "$WORK/$t.runs" | median)
    cpu=$(cut -d' ' -f4 "$WORK/$t.runs" | median)
    split=$(printf "%s / %s" "$(cut -d' ' -f5 "$WORK/$t.runs" | median)" \
      "$(cut -d' ' -f6 "$WORK/$t.runs" | median)")
    [ "$t" = direct ] && { d50=$p50; d99=$p99; }
    [ "$t" = nginx ] && nginx_cpu=$cpu
    added=$(awk -v a="$p50" -v b="$d50" -v x="$p99" -v y="$d99" 'BEGIN {printf "%+.2f / %+.2f", a-b, x-y}')
    ratio=""
    [ -n "${nginx_cpu:-}" ] && [ "$t" != direct ] &&
      ratio=$(awk -v a="$cpu" -v b="$nginx_cpu" 'BEGIN {if (b > 0) printf "(%.2fx)", a / b}')
    [ "$t" = direct ] && added="-" && cpu="$cpu (server)"
    printf "%-8s %-8s %9s %9s %9s  %-22s %-15s %s %s\n" "$c" "$t" "$rps" "$p50" "$p99" "$added" \
      "$split" "$cpu" "$ratio"
  done
done
echo "== load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
