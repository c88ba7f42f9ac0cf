#!/usr/bin/env bash
# Gateway replicas against one gateway on the same workload (the comparison E2E.GatewayReplicaSync
# makes, repeated): two fake model servers of 4 slots (10 ms tokens, 20 ms prefill), a batch flood
# (18 hey clients, max_tokens 8) and interactive traffic (2 clients), PHASE_S seconds each run.
# The reference: one gateway carrying everything. Then three replicas on one redis-server (started
# here) with --replica-mode MODE, the batch flood split over them (6 clients each) and the
# interactive clients through the first. Per run, one line: interactive TTFT p99 (hey's p99 of
# whole responses; every response is 8 tokens), the deepest server queue sampled every 50 ms, the
# batch requests completed, and the Redis calls that failed (reserve mode, all three); then the
# median over the runs of the ratios three / one.
#
#   scripts/dev/gateway-replicas.sh [BUILD_DIR]        (default: build/default)
# Environment: MODE (share or reserve, default reserve), RUNS (default 3), PHASE_S (default 10),
# GATEWAY (the gateway binary), GATEWAY_ARGS (extra flags for every gateway), DUMP (a directory:
# every gateway's /metrics is saved there at the end of its phase, and hey's outputs), STALL_MS
# (stall Redis that long with DEBUG SLEEP every STALL_EVERY_S seconds, default 3, during the three
# replicas' phase: each stall past the Redis timeout sends every replica to its fallback). Needs
# redis-server and hey.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/default}"
GATEWAY="${GATEWAY:-$BUILD/examples/gateway/holdback-gateway}"
MODEL_SERVER="$BUILD/examples/model-server/holdback-model-server"
MODE="${MODE:-reserve}" RUNS="${RUNS:-3}" PHASE_S="${PHASE_S:-10}"
STALL_MS="${STALL_MS:-0}" STALL_EVERY_S="${STALL_EVERY_S:-3}"
for tool in redis-server hey; do
  command -v "$tool" >/dev/null || { echo "$tool not installed"; exit 1; }
done
. scripts/lib/processes.sh  # WORK, cleanup on exit, start VAR NAME CMD...
metric() {
  curl -s --max-time 2 "$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {print $2; exit}'
}
BODY='{"model":"fake-model","prompt":"hello there","max_tokens":8}'
load() {  # load NAME URL OBJECTIVE CLIENTS
  hey -z "${PHASE_S}s" -c "$4" -t 20 -m POST -T application/json \
    -H "x-gateway-inference-objective: $3" -d "$BODY" "$2/v1/completions" >"$WORK/$1.hey" 2>&1 &
  LOADS+=($!)
}
deepest_queue() {
  local deepest=0 w s end=$((SECONDS + PHASE_S - 1))
  while [ "$SECONDS" -lt "$end" ]; do
    for s in "$MS1" "$MS2"; do
      w=$(metric "$s" vllm:num_requests_waiting)
      deepest=$(awk -v a="$deepest" -v b="${w:-0}" 'BEGIN {print (b > a ? b : a)}')
    done
    sleep 0.05
  done
  echo "$deepest"
}
dump() { [ -z "${DUMP:-}" ] || { mkdir -p "$DUMP" && curl -s --max-time 2 "$1/metrics" >"$DUMP/$2.prom"; }; }
p99_ms() { awk '/99% in/ {print $3 * 1000}' "$WORK/$1.hey"; }
ok200() { cat "$@" | awk '$1 == "[200]" {n += $2} END {print n + 0}'; }
bad() { cat "$@" | awk '$1 ~ /^\[5[0-9][0-9]\]$/ {n += $2} /Error distribution:/ {e = 1; next}
  e && NF {gsub(/[][]/, "", $1); n += $1} END {print n + 0}'; }

REDIS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --enable-debug-command local >"$WORK/redis.out" 2>&1 &
PIDS+=($!)
sleep 0.5
start MS1 server1 "$MODEL_SERVER" --port 0 --slots 4 --token-ms 10 --prefill-ms 20 --model fake-model
start MS2 server2 "$MODEL_SERVER" --port 0 --slots 4 --token-ms 10 --prefill-ms 20 --model fake-model
echo "mode $MODE, $RUNS runs of $PHASE_S s$([ "$STALL_MS" -gt 0 ] && echo ", Redis stalled $STALL_MS ms every $STALL_EVERY_S s")"
echo "run | p99 one / three (ms) | ratio | deepest queue one / three | batch one / three | 5xx+errors three | failed Redis calls three"
ratios=() batch_ratios=() queue_excess=()
for run in $(seq "$RUNS"); do
  # shellcheck disable=SC2086
  start GW0 "gateway0-$run" "$GATEWAY" --endpoint "$MS1" --endpoint "$MS2" --listen 127.0.0.1:0 \
    --scrape-interval-ms 25 ${GATEWAY_ARGS:-}
  LOADS=()
  load "one_batch$run" "$GW0" batch 18
  load "one_interactive$run" "$GW0" interactive 2
  deepest_one=$(deepest_queue)
  for pid in "${LOADS[@]}"; do wait "$pid"; done
  dump "$GW0" "one-$run"
  kill "$GW0_PID"; wait "$GW0_PID" 2>/dev/null
  for g in 1 2 3; do
    # shellcheck disable=SC2086
    start "GW$g" "gateway$g-$run" "$GATEWAY" --endpoint "$MS1" --endpoint "$MS2" \
      --listen 127.0.0.1:0 --scrape-interval-ms 25 --replica-sync "redis://127.0.0.1:$REDIS_PORT" \
      --replica-sync-prefix "run$run:" --replica-sync-interval-ms 20 --replica-mode "$MODE" \
      ${GATEWAY_ARGS:-}
  done
  sleep 1
  LOADS=()
  load "three_batch1_$run" "$GW1" batch 6
  load "three_batch2_$run" "$GW2" batch 6
  load "three_batch3_$run" "$GW3" batch 6
  load "three_interactive$run" "$GW1" interactive 2
  if [ "$STALL_MS" -gt 0 ]; then
    (end=$((SECONDS + PHASE_S - 1)); while sleep "$STALL_EVERY_S" && [ "$SECONDS" -lt "$end" ]; do
      redis-cli -p "$REDIS_PORT" DEBUG SLEEP "$(awk -v m="$STALL_MS" 'BEGIN {print m / 1000}')" >/dev/null
    done) &
    STALLER=$!
  fi
  deepest_three=$(deepest_queue)
  for pid in "${LOADS[@]}"; do wait "$pid"; done
  [ "$STALL_MS" -gt 0 ] && wait "$STALLER"
  fails=0
  for g in 1 2 3; do
    v="GW$g"
    dump "${!v}" "three-gw$g-$run"
    f=$(metric "${!v}" holdback_gateway_replica_reserve_failures_total)
    fails=$((fails + ${f:-0}))
  done
  kill "$GW1_PID" "$GW2_PID" "$GW3_PID"; wait "$GW1_PID" "$GW2_PID" "$GW3_PID" 2>/dev/null
  [ -z "${DUMP:-}" ] || cp "$WORK"/*"$run".hey "$WORK"/*"$run".err "$DUMP"/
  p1=$(p99_ms "one_interactive$run") p3=$(p99_ms "three_interactive$run")
  b1=$(ok200 "$WORK/one_batch$run.hey")
  b3=$(ok200 "$WORK"/three_batch?_"$run".hey)
  errs=$(bad "$WORK"/three_*"$run".hey)
  ratio=$(awk -v a="$p3" -v b="$p1" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 99)}')
  ratios+=("$ratio")
  batch_ratios+=("$(awk -v a="$b3" -v b="$b1" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 0)}')")
  queue_excess+=("$(awk -v a="$deepest_three" -v b="$deepest_one" 'BEGIN {print a - b}')")
  echo "$run | $p1 / $p3 | ${ratio}x | $deepest_one / $deepest_three | $b1 / $b3 | $errs | $fails"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "median: interactive p99 $(median "${ratios[@]}")x one gateway's," \
  "deepest queue one gateway's + $(median "${queue_excess[@]}")," \
  "batch $(median "${batch_ratios[@]}") of one gateway's"
