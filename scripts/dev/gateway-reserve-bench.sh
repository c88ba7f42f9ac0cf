#!/usr/bin/env bash
# What --replica-mode reserve costs one replica: one gateway with --replica-sync on a local
# redis-server (started here) over one fast fake model server (1024 slots configured, 1 ms
# tokens, admission wide open: scripts/dev/open-admission.yaml), CLIENTS hey clients at RATE
# requests/s in total for SECONDS_EACH seconds, once per mode (share, then reserve). Per mode:
# the rate served, the client-side p50/p99, and in reserve mode the bookings per second and what
# booking added to a dispatch (holdback_gateway_replica_reserve_dispatch_seconds: from the
# controller's dispatch to its delivery; p50/p99 interpolated within the histogram's buckets).
#
#   scripts/dev/gateway-reserve-bench.sh [BUILD_DIR]        (default: build/default)
# Environment: RATE (default 2500), CLIENTS (default 100), SECONDS_EACH (default 10).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/default}"
GATEWAY="$BUILD/examples/gateway/holdback-gateway"
MODEL_SERVER="$BUILD/examples/model-server/holdback-model-server"
RATE="${RATE:-2500}" CLIENTS="${CLIENTS:-100}" SECONDS_EACH="${SECONDS_EACH:-10}"
for tool in redis-server hey; do
  command -v "$tool" >/dev/null || { echo "$tool not installed"; exit 1; }
done
. scripts/lib/processes.sh  # WORK, cleanup on exit, start VAR NAME CMD...
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
REDIS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no >"$WORK/redis.out" 2>&1 &
PIDS+=($!)
sleep 0.3
start MS model-server "$MODEL_SERVER" --port 0 --slots 1024 --token-ms 1 --prefill-ms 0 \
  --model fake-model
BODY='{"model":"fake-model","prompt":"hi","max_tokens":4}'
q=$(awk -v r="$RATE" -v c="$CLIENTS" 'BEGIN {printf "%.2f", r / c}')
printf "%-8s %8s %8s %8s %12s %14s %14s\n" mode "req/s" "p50 ms" "p99 ms" "bookings/s" \
  "booking p50 ms" "booking p99 ms"
for mode in share reserve; do
  start GW "gateway-$mode" "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 \
    --config scripts/dev/open-admission.yaml --replica-sync "redis://127.0.0.1:$REDIS_PORT" \
    --replica-sync-prefix "$mode:" --replica-mode "$mode"
  sleep 1
  hey -z "${SECONDS_EACH}s" -c "$CLIENTS" -q "$q" -m POST -T application/json -d "$BODY" \
    "$GW/v1/completions" >"$WORK/$mode.hey" 2>&1
  curl -s "$GW/metrics" >"$WORK/$mode.metrics"
  kill "$GW_PID"; wait "$GW_PID" 2>/dev/null
  read -r rps p50 p99 < <(awk '/Requests\/sec/ {r = $2} /50% in/ {a = $3 * 1000}
    /99% in/ {b = $3 * 1000} END {printf "%.0f %.1f %.1f\n", r, a, b}' "$WORK/$mode.hey")
  # Histogram quantiles: linear within the bucket that holds the rank.
  read -r bps q50 q99 < <(awk -v s="$SECONDS_EACH" '
    /^holdback_gateway_replica_reserve_bookings_total / {bk = $2}
    /^holdback_gateway_replica_reserve_dispatch_seconds_bucket/ {
      match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
      n++; ub[n] = (le == "+Inf" ? 1e9 : le + 0); c[n] = $2 }
    function q(p,   i, rank, lo, clo) {
      rank = p * c[n]; lo = 0; clo = 0
      for (i = 1; i <= n; i++) { if (c[i] >= rank && ub[i] == 1e9) return ">" lo * 1000
        if (c[i] >= rank) return sprintf("%.3f", (lo + (ub[i] - lo) * (rank - clo) / (c[i] - clo + 1e-9)) * 1000)
        lo = ub[i]; clo = c[i] }
      return -1 }
    END { if (n == 0) { print "- - -"; exit } printf "%.0f %s %s\n", bk / s, q(0.5), q(0.99) }' \
    "$WORK/$mode.metrics")
  printf "%-8s %8s %8s %8s %12s %14s %14s\n" "$mode" "$rps" "$p50" "$p99" "$bps" "$q50" "$q99"
  grep -E '^\s+\[[0-9]+\]' "$WORK/$mode.hey" | head -3
done
