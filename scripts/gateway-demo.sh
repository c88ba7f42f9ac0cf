#!/usr/bin/env bash
# The HTTP gateway demo (docs/guide/gateway.md): builds holdback-gateway and holdback-model-server,
# starts two fake model servers (4 slots each) and two gateways in front of them -- one with its
# default config (the recommended configuration, capacity learned from the servers), one with
# plain binary backpressure (static-usage-limit-policy, threshold 1.0) -- then, through each
# gateway in turn, floods the pool with batch requests while sending interactive requests one
# after another, and prints the interactive latencies (median, p99, max), the batch outcome and a
# few gateway metrics. Takes about 20 s after the build. Loopback only.
#
#   scripts/gateway-demo.sh [BUILD_DIR]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
holdback_ensure_packages curl

BUILD="${1:-build}"
BATCH_REQUESTS=64   # batch flood: 64 requests, 32 at a time (4x the pool's 8 slots)
BATCH_PARALLEL=32
INTERACTIVE=40      # interactive requests per phase, one every 100 ms (open loop)

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" -j2 --target holdback_gateway holdback_model_server >/dev/null

. scripts/lib/processes.sh  # WORK, cleanup on exit, start VAR NAME CMD...

# A small GPU: 4 slots, 200 KV tokens, 10 ms per token. A batch request (48 tokens) takes about
# 0.5 s and a quarter of the KV cache; an interactive one (8 tokens) about 0.1 s.
SERVER=("$BUILD/examples/model-server/holdback-model-server" --slots 4 --token-ms 10
        --prefill-ms 20 --kv-capacity-tokens 200)
start M1 model-1 "${SERVER[@]}"
start M2 model-2 "${SERVER[@]}"

GATEWAY="$BUILD/examples/gateway/holdback-gateway"
# The control: binary backpressure (static-usage-limit-policy, every band gated only at saturation
# 1.0) with the default config's detector and bands, no eviction.
CONTROL_CONFIG=examples/configs/static-1.0-gateway.yaml
# The holdback gateway: its defaults (the recommended configuration, capacity learned).
start G_HOLDBACK gw-holdback "$GATEWAY" --endpoint "$M1" --endpoint "$M2"
start G_CONTROL gw-control "$GATEWAY" --endpoint "$M1" --endpoint "$M2" \
  --config "$CONTROL_CONFIG"
echo "model servers: $M1 $M2"
echo "gateways:      $G_HOLDBACK (default config), $G_CONTROL (no holdback)"

# interactive GATEWAY FILE: INTERACTIVE requests, one every 100 ms whether or not the previous
# ones are done; "status seconds" lines into FILE.
interactive() {
  : >"$2"
  local pids=()
  for _ in $(seq 1 "$INTERACTIVE"); do
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -X POST "$1/v1/completions" \
      -H 'x-gateway-inference-objective: interactive' -H 'x-gateway-inference-fairness-id: chat' \
      -d '{"prompt": "i", "max_tokens": 8}' >>"$2" &
    pids+=($!)
    sleep 0.1
  done
  wait "${pids[@]}"
}

# summary LABEL FILE: median, p99 (nearest rank) and max of the latencies in FILE, and the status
# codes.
summary() {
  sort -k2 -n "$2" | awk -v label="$1" '
    { t[NR] = $2 * 1000; code[$1]++ }
    END {
      codes = ""; for (c in code) codes = codes " " c "x" code[c]
      p99 = int(0.99 * NR); if (p99 < 0.99 * NR) p99++
      printf "  %-34s median %6.0f ms   p99 %6.0f ms   max %6.0f ms   statuses:%s\n", label, t[int((NR + 1) / 2)], t[p99], t[NR], codes
    }'
}

phase() {
  local label="$1" gw="$2"
  interactive "$gw" "$WORK/$label-unloaded.txt"
  # The flood: one curl process, BATCH_PARALLEL transfers at a time.
  curl -s --no-progress-meter -Z --parallel-max "$BATCH_PARALLEL" -o /dev/null \
    -w '%{http_code} %{time_total} %header{x-holdback-queued-ms}\n' \
    -X POST "$gw/v1/completions?n=[1-$BATCH_REQUESTS]" \
    -H 'x-gateway-inference-objective: batch' -H 'x-gateway-inference-fairness-id: nightly-batch' \
    -d '{"prompt": "b", "max_tokens": 48}' >"$WORK/$label-batch.txt" &
  local flood=$!
  sleep 0.5
  interactive "$gw" "$WORK/$label-flood.txt"
  local queue
  queue="$(curl -s "$gw/metrics" | awk '/^holdback_flow_control_queue_size\{priority="-1"/ {s += $2; n++} END {if (n) print s}')"
  wait "$flood"
  echo "$label gateway:"
  summary "interactive, idle pool" "$WORK/$label-unloaded.txt"
  summary "interactive, during batch flood" "$WORK/$label-flood.txt"
  summary "batch ($BATCH_REQUESTS, $BATCH_PARALLEL at a time)" "$WORK/$label-batch.txt"
  awk '{ print $3 + 0 }' "$WORK/$label-batch.txt" | sort -n | awk '{ q[NR] = $1 }
    END { printf "  batch time queued in holdback       median %6d ms   max %6d ms\n", q[int((NR + 1) / 2)], q[NR] }'
  echo "  batch requests queued in the gateway ~2.5 s into the flood: ${queue:-?}"
}

phase holdback "$G_HOLDBACK"
phase no-holdback "$G_CONTROL"

echo "holdback gateway metrics (excerpt):"
curl -s "$G_HOLDBACK/metrics" | grep -E '^holdback_gateway_(responses_total|endpoint_dispatches_total|scrape_errors_total|endpoint_slots|endpoint_kv_capacity_tokens|evictions_total)|^holdback_flow_control_requests_total\{outcome="Dispatched"' | sed 's/^/  /'
