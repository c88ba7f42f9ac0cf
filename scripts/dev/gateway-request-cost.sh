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
# PROXY=nginx (syscalls only: count nginx's, set up as bench/proxy-compare.sh does),
# CACHE_SIM=BYTES (instructions only: also simulate the data cache, with a last level of BYTES,
# 8-way, and print its data misses per request; CACHE_SIM=1048576 stands for a 1 MiB L2: what
# does not fit there costs an L3 or memory access).
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
  cache=()
  [ -n "${CACHE_SIM:-}" ] && cache=(--cache-sim=yes "--LL=$CACHE_SIM,8,64")
  start GW gateway-cg valgrind --tool=callgrind "${cache[@]}" --callgrind-out-file="$WORK/cg.out" \
    "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 --threads 2 \
    --config scripts/dev/open-admission.yaml
  load 2000 >/dev/null  # warm-up
  callgrind_control -z "$GW_PID" >/dev/null 2>&1
  ok=$(load "$REQUESTS")
  callgrind_control -d "$GW_PID" >/dev/null 2>&1
  sleep 1
  callgrind_annotate "$(ls -t "$WORK"/cg.out* | head -1)" >"$WORK/totals.txt" 2>/dev/null
  ir=$(awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}' "$WORK/totals.txt")
  echo "== user-space instructions per request ($ok requests answered 200, $CLIENTS clients; callgrind)"
  awk -v ir="$ir" -v n="$ok" 'BEGIN {printf "  %.0f\n", ir / n}'
  if [ -n "${CACHE_SIM:-}" ]; then  # events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
    echo "== data misses per request, L1 (reads + writes) and a $CACHE_SIM-byte last level (reads + writes)"
    awk -v n="$ok" '/PROGRAM TOTALS/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^[0-9,]+$/) { gsub(",", "", $i); v[++k] = $i }
        printf "  L1 %.1f + %.1f, last level %.1f + %.1f\n", v[5] / n, v[6] / n, v[8] / n, v[9] / n
        exit
      }' "$WORK/totals.txt"
  fi
  [ -n "${KEEP_PROFILE:-}" ] && cp "$(ls -t "$WORK"/cg.out* | head -1)" "$KEEP_PROFILE"
fi
