#!/usr/bin/env bash
# The gateway's cost per proxied request, counted rather than timed (so, unlike CPU time, nearly
# insensitive to the machine's load): system calls per request (strace -c -f on the gateway
# while hey sends REQUESTS requests) and user-space instructions per request (valgrind
# --tool=callgrind, zeroed after a warm-up, dumped after the load). Same setup as
# bench/proxy-compare.sh: the fake model server (1 ms tokens, 4 tokens, 1024 slots), the gateway
# with --threads 2 and admission wide open, keep-alive hey clients.
#
#   scripts/dev/gateway-request-cost.sh [BUILD_DIR] [syscalls|instructions|both]
# Environment: CLIENTS (default 64), REQUESTS (default 6400), GATEWAY (default: the build's),
# PROXY=nginx (syscalls only: count nginx's, set up as bench/proxy-compare.sh does).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/default}"
MODE="${2:-both}"
GATEWAY="${GATEWAY:-$BUILD/examples/gateway/holdback-gateway}"
MODEL_SERVER="$BUILD/examples/model-server/holdback-model-server"
CLIENTS="${CLIENTS:-64}"
REQUESTS="${REQUESTS:-6400}"
command -v hey >/dev/null || { echo "hey not installed (apt-get install hey)"; exit 1; }
. scripts/lib/processes.sh
. scripts/lib/nginx.sh
BODY='{"model":"fake-model","prompt":"hi","max_tokens":4}'
load() {  # load N: N requests from CLIENTS keep-alive clients; prints the 200s
  hey -n "$1" -c "$CLIENTS" -m POST -T application/json -d "$BODY" "$GW/v1/completions" \
    >"$WORK/hey.txt" 2>&1
  awk '$1 == "[200]" {print $2}' "$WORK/hey.txt"
}
start MS model-server "$MODEL_SERVER" --port 0 --slots 1024 --token-ms 1 --prefill-ms 0 \
  --model fake-model
if [ "$MODE" = syscalls ] || [ "$MODE" = both ]; then
  command -v strace >/dev/null || { echo "strace not installed (apt-get install strace)"; exit 1; }
  if [ "${PROXY:-gateway}" = nginx ]; then  # nginx instead, as bench/proxy-compare.sh runs it
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    start_nginx "$port" "${MS#http://}"
    GW_PID=$NGINX_PID GW="http://127.0.0.1:$port"
    sleep 1
  else
    start GW gateway "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 --threads 2 \
      --config scripts/dev/open-admission.yaml
  fi
  load "$REQUESTS" >/dev/null  # warm-up: connections, pools
  traced=(-p "$GW_PID")
  for p in $(pgrep -P "$GW_PID"); do traced+=(-p "$p"); done  # nginx's workers
  strace -c -f "${traced[@]}" -o "$WORK/strace.txt" &
  STRACE=$!
  sleep 1
  ok=$(load "$REQUESTS")
  kill -INT "$STRACE"
  wait "$STRACE" 2>/dev/null
  echo "== system calls per request ($ok requests answered 200, $CLIENTS clients; strace -c -f)"
  awk -v n="$ok" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {
      calls = $4; errors = ($5 ~ /^[0-9]+$/ ? $5 : 0); total += calls
      printf "  %-16s %6.2f", $NF, calls / n; if (errors > 0) printf "  (%.2f failed)", errors / n; printf "\n"
    } END {printf "  %-16s %6.2f\n", "total", total / n}' "$WORK/strace.txt"
  kill "$GW_PID" 2>/dev/null; wait "$GW_PID" 2>/dev/null
fi
if [ "$MODE" = instructions ] || [ "$MODE" = both ]; then
  command -v valgrind >/dev/null || { echo "valgrind not installed (apt-get install valgrind)"; exit 1; }
  start GW gateway-cg valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" \
    "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 --threads 2 \
    --config scripts/dev/open-admission.yaml
  load 2000 >/dev/null  # warm-up
  callgrind_control -z "$GW_PID" >/dev/null 2>&1
  ok=$(load "$REQUESTS")
  callgrind_control -d "$GW_PID" >/dev/null 2>&1
  sleep 1
  ir=$(callgrind_annotate "$(ls -t "$WORK"/cg.out* | head -1)" 2>/dev/null |
    awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
  echo "== user-space instructions per request ($ok requests answered 200, $CLIENTS clients; callgrind)"
  awk -v ir="$ir" -v n="$ok" 'BEGIN {printf "  %.0f\n", ir / n}'
  [ -n "${KEEP_PROFILE:-}" ] && cp "$(ls -t "$WORK"/cg.out* | head -1)" "$KEEP_PROFILE"
fi
