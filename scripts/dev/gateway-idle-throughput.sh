#!/usr/bin/env bash
# The throughput target: through the gateway's built-in config over ONE idle fake model
# server (64 slots, 330 ms requests: 10 ms prefill + 16 tokens x 20 ms), hey at 64 concurrent
# clients, against going direct. Medians of RUNS runs. Loopback; everything on the same cores.
#   scripts/dev/gateway-idle-throughput.sh [BUILD_DIR] [RUNS]   (default: build/default, 3)
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/default}"
RUNS="${2:-3}"
MS="$BUILD/examples/model-server/holdback-model-server"
GW="$BUILD/examples/gateway/holdback-gateway"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
"$MS" --port 0 --slots 64 --token-ms 20 --prefill-ms 10 --threads 256 >"$WORK/ms.out" 2>&1 &
PIDS+=($!)
sleep 0.5
MSURL="$(sed -n 's/^listening on //p' "$WORK/ms.out")"
"$GW" --endpoint "$MSURL" --listen 127.0.0.1:0 >"$WORK/gw.out" 2>"$WORK/gw.err" &
PIDS+=($!)
sleep 1
GWURL="$(sed -n 's/^listening on //p' "$WORK/gw.out")"
BODY='{"model":"fake-model","prompt":"hi","max_tokens":16}'
run() {
  hey -z 5s -c 64 -m POST -T application/json -d "$BODY" "$1/v1/completions" >"$WORK/hey.txt" 2>&1
  awk '/Requests\/sec/ {rps=$2} /50% in/ {p50=$3*1000} $1 ~ /^\[[0-9]+\]$/ {s=s $1 "x" $2 " "}
       END {printf "%.1f %.0f %s\n", rps, p50, s}' "$WORK/hey.txt"
}
for target in direct gateway; do
  url="$MSURL"; [ "$target" = gateway ] && url="$GWURL"
  for r in $(seq "$RUNS"); do echo "$target run $r: $(run "$url")"; done
done
