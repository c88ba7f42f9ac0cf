#!/usr/bin/env bash
# The gateway at high concurrency: N keep-alive clients at a fixed total rate through the gateway
# over one fast fake model server (1 ms tokens, 1024 slots), everything on the same cores. Checks
# the must-hold figures: no 5xx, no transport error (hey's "Error distribution"), p99 below
# P99_LIMIT_MS. Prints one line per client count and exits 1 when a check fails.
# Needs hey (Debian package hey), or wrk with TOOL=wrk.
#
#   scripts/dev/gateway-scale.sh [BUILD_DIR]          (default: build/default)
# Environment: CLIENTS (default "200 1000"), RATE (total req/s, default 2000), SECONDS_EACH
# (default 10), P99_LIMIT_MS (default 100), GATEWAY_ARGS (extra gateway flags), TOOL (hey, the
# default, or wrk: C and epoll, two threads; each connection waits a think time drawn uniformly
# from 0 to 2 x CLIENTS / RATE seconds before each request, so the total rate is about RATE when
# responses are fast; its latencies exclude the think time).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/default}"
GATEWAY="$BUILD/examples/gateway/holdback-gateway"
MODEL_SERVER="$BUILD/examples/model-server/holdback-model-server"
RATE="${RATE:-2000}"
SECONDS_EACH="${SECONDS_EACH:-10}"
P99_LIMIT_MS="${P99_LIMIT_MS:-100}"
TOOL="${TOOL:-hey}"
command -v "$TOOL" >/dev/null || { echo "$TOOL not installed (apt-get install $TOOL)"; exit 1; }
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
# wrk's run, printed in hey's summary format (the lines read below): CLIENTS URL.
run_wrk() {
  local think_ms
  think_ms=$(awk -v r="$RATE" -v c="$1" 'BEGIN {printf "%d", 2000 * c / r}')
  cat >"$WORK/wrk.lua" <<LUA
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
function delay() return math.random(0, $think_ms) end
done = function(summary, latency)
  io.write(string.format("  Requests/sec: %.1f\n", summary.requests / (summary.duration / 1e6)))
  io.write(string.format("  Slowest: %.4f secs\n", latency.max / 1e6))
  io.write(string.format("  50%% in %.4f secs\n", latency:percentile(50) / 1e6))
  io.write(string.format("  99%% in %.4f secs\n", latency:percentile(99) / 1e6))
  local e = summary.errors
  io.write(string.format("  [200]\t%d responses\n", summary.requests - e.status))
  if e.status > 0 then io.write(string.format("  [400]\t%d responses (status >= 400)\n", e.status)) end
  local n = e.connect + e.read + e.write + e.timeout
  if n > 0 then
    io.write("Error distribution:\n")
    io.write(string.format("  [%d]\tconnect %d, read %d, write %d, timeout %d\n", n, e.connect,
                           e.read, e.write, e.timeout))
  end
end
LUA
  wrk -t 2 -c "$1" -d "${SECONDS_EACH}s" --timeout 10s -s "$WORK/wrk.lua" "$2/v1/completions" 2>&1
}
failed=0
printf "%-8s %-8s %8s %9s %9s %9s  %-28s %s\n" clients target "req/s" "p50 ms" "p99 ms" "max ms" statuses \
  "errors, upstream connects during the run"
# The same load straight to the server first (DIRECT=0 skips it): what the machine itself allows.
for c in ${CLIENTS:-200 1000}; do
 for target in $([ "${DIRECT:-1}" = 1 ] && echo direct) gateway; do
  url="$GW"; [ "$target" = direct ] && url="$MS"
  q=$(awk -v r="$RATE" -v c="$c" 'BEGIN {printf "%.2f", r / c}')
  connects0=$(metric holdback_gateway_upstream_connects_total)
  if [ "$TOOL" = wrk ]; then
    run_wrk "$c" "$url" >"$WORK/hey.txt"
  else
    hey -z "${SECONDS_EACH}s" -c "$c" -q "$q" -m POST -T application/json -d "$BODY" \
      "$url/v1/completions" >"$WORK/hey.txt" 2>&1
  fi
  connects1=$(metric holdback_gateway_upstream_connects_total)
  read -r rps p50 p99 slowest statuses < <(awk '
    /Requests\/sec/ {rps=$2} /Slowest:/ {slow=$2*1000} /50% in/ {p50=$3*1000} /99% in/ {p99=$3*1000}
    $1 ~ /^\[[0-9]+\]$/ {s=s $1 "x" $2 " "}
    END {printf "%.0f %.1f %.1f %.1f %s\n", rps, p50, p99, slow, s}' "$WORK/hey.txt")
  errors=$(awk '/Error distribution:/ {on=1; next} on && NF {gsub(/[][]/, "", $1); n += $1} END {print n + 0}' "$WORK/hey.txt")
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
