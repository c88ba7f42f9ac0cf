#!/usr/bin/env bash
# The gateway's load figures (docs/performance/gateway.md): added latency and throughput over an
# idle fake model server (1 ms tokens), 2000 req/s for 30 s, slowloris, 5000 idle connections.
# Needs hey (Debian package hey) and python3. Loopback only; everything on the same cores.
#
#   scripts/dev/gateway-load.sh [BUILD_DIR] [RUNS]     (default: build/default, 3)
# Environment: GATEWAY_ARGS (extra gateway flags, e.g. "--threads 1"), CLIENTS (default "1 16 64"),
# LATENCY_ONLY=1 (skip the 2000 req/s, slowloris and idle-connection parts), SLOT_TERM=1 (the
# built-in config plus the server's slot count, `maxRunningRequests: 1024`, so that the dispatch
# ledger does not count unscraped dispatches as waiting: the proxy's cost without holdback's
# queueing), FLOOR=1 (also measure the floor of a proxy, bench/proxy_floor.cpp: a blind
# single-threaded epoll TCP relay in front of the same server, printed as target "floor" and
# compared in the same runs).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/default}"
RUNS="${2:-3}"
GATEWAY="$BUILD/examples/gateway/holdback-gateway"
MODEL_SERVER="$BUILD/examples/model-server/holdback-model-server"
PROXY_FLOOR="$BUILD/bench/holdback-proxy-floor"
command -v hey >/dev/null || { echo "hey not installed (apt-get install hey)"; exit 1; }
. scripts/lib/processes.sh  # WORK, cleanup on exit, start VAR NAME CMD...
BODY='{"model":"fake-model","prompt":"hi","max_tokens":4}'
# run_hey URL ARGS...: prints "rps p50_ms p99_ms statuses"
run_hey() {
  local url="$1"
  shift
  hey "$@" -m POST -T application/json -d "$BODY" "$url/v1/completions" >"$WORK/hey.txt" 2>&1
  awk '/Requests\/sec/ {rps=$2} /50% in/ {p50=$3*1000} /99% in/ {p99=$3*1000}
       $1 ~ /^\[[0-9]+\]$/ {s=s $1 "x" $2 " "}
       END {printf "%.0f %.2f %.2f %s\n", rps, p50, p99, s}' "$WORK/hey.txt"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# gateway_cpu_ticks: the gateway process's user + system CPU time so far, in clock ticks
gateway_cpu_ticks() { awk '{print $14 + $15}' "/proc/$GW_PID/stat"; }
# cpu_split: "hey_total hey_sys server_total server_sys gateway_total gateway_sys floor_total
# floor_sys" in clock ticks so far: hey's from this shell's waited-for children (cutime, cstime),
# the others from their /proc entries (the floor's 0 0 without FLOOR=1).
cpu_split() {
  { awk '{printf "%d %d ", $16 + $17, $17}' /proc/$$/stat
    awk '{printf "%d %d ", $14 + $15, $15}' "/proc/$MS_PID/stat"
    awk '{printf "%d %d ", $14 + $15, $15}' "/proc/$GW_PID/stat"
    if [ -n "${FL_PID:-}" ]; then awk '{printf "%d %d\n", $14 + $15, $15}' "/proc/$FL_PID/stat"
    else echo "0 0"; fi; }
}
# queued_totals: "SUM COUNT" of the controller's queue-wait histogram over dispatched requests
queued_totals() {
  curl -s "$GW/metrics" | awk '/^holdback_flow_control_request_queue_duration_seconds_sum\{outcome="Dispatched"/ {s+=$2}
    /^holdback_flow_control_request_queue_duration_seconds_count\{outcome="Dispatched"/ {c+=$2}
    END {printf "%.6f %d\n", s, c}'
}

start MS model-server "$MODEL_SERVER" --port 0 --slots 1024 --token-ms 1 --prefill-ms 0 \
  --threads 512 --model fake-model
MS_PID="${PIDS[0]}"
EXTRA_ARGS="${GATEWAY_ARGS:-}"
if [ "${SLOT_TERM:-0}" = 1 ]; then
  "$GATEWAY" --print-default-config |
    sed 's/^      stalenessPolicy: saturated$/&\n      maxRunningRequests: 1024/' >"$WORK/slots.yaml"
  grep -q 'maxRunningRequests: 1024' "$WORK/slots.yaml" || { echo "SLOT_TERM: config edit failed"; exit 1; }
  EXTRA_ARGS="$EXTRA_ARGS --config $WORK/slots.yaml"
fi
# shellcheck disable=SC2086
start GW gateway "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 $EXTRA_ARGS
GW_PID="${PIDS[1]}"
TARGETS="direct gateway"
if [ "${FLOOR:-0}" = 1 ]; then
  [ -x "$PROXY_FLOOR" ] || { echo "FLOOR=1: $PROXY_FLOOR not built (target holdback_proxy_floor)"; exit 1; }
  start FL proxy-floor "$PROXY_FLOOR" --upstream "${MS#http://}"
  FL_PID="${PIDS[2]}"
  TARGETS="direct floor gateway"
fi
sleep 0.5
hey -z 2s -c 16 -m POST -T application/json -d "$BODY" "$GW/v1/completions" >/dev/null 2>&1  # warm-up

echo "== added latency and throughput (hey -z 5s, keep-alive, body max_tokens 4 x 1 ms), $RUNS runs, medians"
printf "%-8s %-9s %10s %10s %10s   %s\n" clients target "req/s" "p50 ms" "p99 ms" "added p50/p99, throughput"
for c in ${CLIENTS:-1 16 64}; do
  for t in $TARGETS; do
    url="$MS"; [ "$t" = gateway ] && url="$GW"; [ "$t" = floor ] && url="$FL"
    : >"$WORK/$t.runs"
    if [ "$t" = gateway ]; then
      read -r q_sum0 q_count0 < <(queued_totals)
      read -r cpu0 < <(gateway_cpu_ticks)
    fi
    read -r -a split0 < <(cpu_split)
    for _ in $(seq "$RUNS"); do run_hey "$url" -z 5s -c "$c" >>"$WORK/$t.runs"; done
    read -r -a split1 < <(cpu_split)
    rps=$(cut -d' ' -f1 "$WORK/$t.runs" | median)
    p50=$(cut -d' ' -f2 "$WORK/$t.runs" | median)
    p99=$(cut -d' ' -f3 "$WORK/$t.runs" | median)
    eval "${t}_rps=$rps ${t}_p50=$p50 ${t}_p99=$p99"
    extra=""
    if [ "$t" = floor ]; then
      extra=$(awk -v a="$floor_p50" -v b="$direct_p50" -v c="$floor_p99" -v d="$direct_p99" \
        -v e="$floor_rps" -v f="$direct_rps" 'BEGIN {printf "+%.2f / +%.2f ms, %.0f %%", a-b, c-d, 100*e/f}')
    fi
    if [ "$t" = gateway ]; then
      read -r q_sum1 q_count1 < <(queued_totals)
      read -r cpu1 < <(gateway_cpu_ticks)
      # The mean time the gateway's requests waited in holdback (part of the added latency).
      extra=$(awk -v a="$gateway_p50" -v b="$direct_p50" -v c="$gateway_p99" -v d="$direct_p99" \
        -v e="$gateway_rps" -v f="$direct_rps" -v qs="$(awk -v x="$q_sum1" -v y="$q_sum0" 'BEGIN {print x-y}')" \
        -v qc="$((q_count1 - q_count0))" -v cpu="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {printf "+%.2f / +%.2f ms, %.0f %%, queued %.2f ms mean, gateway CPU %.1f us/request",
                a-b, c-d, 100*e/f, (qc > 0 ? 1000 * qs / qc : 0), (qc > 0 ? 1e6 * cpu / hz / qc : 0)}')
    fi
    printf "%-8s %-9s %10s %10s %10s   %s   [runs: %s]\n" "$c" "$t" "$rps" "$p50" "$p99" "$extra" \
      "$(cut -d' ' -f2,3 "$WORK/$t.runs" | tr '\n' ';')"
    # CPU per completed request of each process (all on the same cores): what the gateway costs
    # beside what the load tool and the server cost for the same request.
    done_requests=$(grep -o '\[200\]x[0-9]*' "$WORK/$t.runs" | awk -Fx '{n += $2} END {print n + 0}')
    cpu_line=$(awk -v n="$done_requests" -v hz="$(getconf CLK_TCK)" -v a="${split0[*]}" -v b="${split1[*]}" \
      -v t="$t" -v fl="${floor_cpu:-}" \
      'BEGIN {split(a, x, " "); split(b, y, " "); if (n == 0) exit
              f = 1e6 / hz / n
              printf "         CPU per request, user+system (system) us: hey %.0f (%.0f), server %.0f (%.0f), gateway %.0f (%.0f), floor %.0f (%.0f)",
                     (y[1]-x[1])*f, (y[2]-x[2])*f, (y[3]-x[3])*f, (y[4]-x[4])*f, (y[5]-x[5])*f, (y[6]-x[6])*f, (y[7]-x[7])*f, (y[8]-x[8])*f
              if (t == "gateway" && fl > 0) printf "; gateway / floor %.2fx", (y[5]-x[5])*f / fl
              printf "\n"}')
    echo "$cpu_line"
    # The floor's CPU per request, for the gateway row's ratio in the same run.
    [ "$t" = floor ] && floor_cpu=$(sed -n 's/.*floor \([0-9.]*\) (.*/\1/p' <<<"$cpu_line")
  done
done

[ "${LATENCY_ONLY:-0}" = 1 ] && exit 0
echo "== 2000 req/s for 30 s through the gateway (hey -z 30s -c 50 -q 40)"
run_hey "$GW" -z 30s -c 50 -q 40 | awk '{printf "req/s %s  p50 %s ms  p99 %s ms  statuses %s\n", $1, $2, $3, $4 $5 $6}'

echo "== slowloris: ordinary requests (hey -z 10s -c 4) idle, then beside 1000 trickling connections"
run_hey "$GW" -z 10s -c 4 | awk '{printf "idle:          req/s %s  p50 %s ms  p99 %s ms  statuses %s\n", $1, $2, $3, $4 $5}'
python3 scripts/dev/gateway_load_clients.py slowloris 127.0.0.1 "${GW##*:}" 1000 16 &
SLOW=$!
sleep 5
open_conns=$(curl -s "$GW/metrics" | awk '$1 == "holdback_gateway_connections_open" {print $2}')
run_hey "$GW" -z 10s -c 4 | awk -v o="$open_conns" '{printf "with slowloris: req/s %s  p50 %s ms  p99 %s ms  statuses %s (open connections %s)\n", $1, $2, $3, $4 $5, o}'
curl -s -o /dev/null -w "healthz during slowloris: %{time_total} s\n" "$GW/healthz"
wait "$SLOW"

echo "== 5000 idle keep-alive connections"
rss() { awk '/VmRSS/ {printf "%.1f MB", $2/1024}' "/proc/$GW_PID/status"; }
echo "gateway RSS before: $(rss)"
python3 scripts/dev/gateway_load_clients.py idle 127.0.0.1 "${GW##*:}" 5000 8 &
IDLE=$!
sleep 6
echo "gateway RSS with them open: $(rss); open per /metrics: $(curl -s "$GW/metrics" | awk '$1 == "holdback_gateway_connections_open" {print $2}')"
wait "$IDLE"
curl -s "$GW/metrics" | grep -E '^holdback_gateway_(responses_total|upstream_(connects|reuses|failures)_total|client_timeouts_total)'
