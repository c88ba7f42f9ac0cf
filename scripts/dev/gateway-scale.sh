#!/usr/bin/env bash
# The gateway at high concurrency: N keep-alive clients at a fixed total rate through the gateway
# over one fast fake model server (1 ms tokens, 1024 slots), everything on the same cores. Checks
# the must-hold figures: no 5xx, no transport error (hey's "Error distribution"), p99 below
# P99_LIMIT_MS. Prints one line per client count and exits 1 when a check fails.
# Needs hey (Debian package hey).
#
#   scripts/dev/gateway-scale.sh [BUILD_DIR]          (default: build/default)
# Environment: CLIENTS (default "200 1000"), RATE (total req/s, default 2000), SECONDS_EACH
# (default 10), P99_LIMIT_MS (default 100), GATEWAY_ARGS (extra gateway flags).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/default}"
GATEWAY="$BUILD/examples/gateway/holdback-gateway"
MODEL_SERVER="$BUILD/examples/model-server/holdback-model-server"
RATE="${RATE:-2000}"
SECONDS_EACH="${SECONDS_EACH:-10}"
P99_LIMIT_MS="${P99_LIMIT_MS:-100}"
command -v hey >/dev/null || { echo "hey not installed (apt-get install hey)"; exit 1; }
. scripts/lib/processes.sh  # WORK, cleanup on exit, start VAR NAME CMD...
# hey's file descriptors: one per client connection, plus the gateway's two per client.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
start MS model-server "$MODEL_SERVER" --port 0 --slots 1024 --token-ms 1 --prefill-ms 0 \
  --model fake-model
# Admission wide open: the server's slot count is configured (maxRunningRequests), so that the
# dispatch ledger counts unscraped dispatches as running, not waiting: the proxy's behaviour at
# this concurrency, not holdback's queueing.
# shellcheck disable=SC2086
start GW gateway "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 --config scripts/dev/open-admission.yaml \
  ${GATEWAY_ARGS:-}
BODY='{"model":"fake-model","prompt":"hi","max_tokens":4}'
metric() { curl -s "$GW/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
failed=0
printf "%-8s %-8s %8s %9s %9s %9s  %-28s %s\n" clients target "req/s" "p50 ms" "p99 ms" "max ms" statuses \
  "errors, upstream connects during the run"
# The same load straight to the server first (DIRECT=0 skips it): what the machine itself allows.
for c in ${CLIENTS:-200 1000}; do
 for target in $([ "${DIRECT:-1}" = 1 ] && echo direct) gateway; do
  url="$GW"; [ "$target" = direct ] && url="$MS"
  q=$(awk -v r="$RATE" -v c="$c" 'BEGIN {printf "%.2f", r / c}')
  connects0=$(metric holdback_gateway_upstream_connects_total)
  hey -z "${SECONDS_EACH}s" -c "$c" -q "$q" -m POST -T application/json -d "$BODY" \
    "$url/v1/completions" >"$WORK/hey.txt" 2>&1
  connects1=$(metric holdback_gateway_upstream_connects_total)
  read -r rps p50 p99 slowest statuses < <(awk '
    /Requests\/sec/ {rps=$2} /Slowest:/ {slow=$2*1000} /50% in/ {p50=$3*1000} /99% in/ {p99=$3*1000}
    $1 ~ /^\[[0-9]+\]$/ {s=s $1 "x" $2 " "}
    END {printf "%.0f %.1f %.1f %.1f %s\n", rps, p50, p99, slow, s}' "$WORK/hey.txt")
  errors=$(awk '/Error distribution:/ {on=1; next} on && NF {n += $1} END {print n + 0}' "$WORK/hey.txt")
  non200=$(echo "$statuses" | tr ' ' '\n' | grep -v '^\[200\]' | grep -c . || true)
  printf "%-8s %-8s %8s %9s %9s %9s  %-28s %s errors, %s connects\n" "$c" "$target" "$rps" "$p50" \
    "$p99" "$slowest" "$statuses" "$errors" "$((${connects1:-0} - ${connects0:-0}))"
  [ "$target" = direct ] && continue
  if [ "$errors" != 0 ]; then
    grep -A5 'Error distribution' "$WORK/hey.txt" | head -6
    failed=1
  fi
  [ "$non200" = 0 ] || failed=1
  awk -v p="$p99" -v l="$P99_LIMIT_MS" 'BEGIN {exit !(p < l)}' || failed=1
 done
done
[ "$failed" = 0 ] && echo "PASS" || echo "FAIL"
exit "$failed"
