#!/usr/bin/env bash
# End to end: three holdback-gateway replicas with --replica-mode reserve over one redis-server
# (started here on a free port) in front of two fake model servers of 4 slots each (ctest
# E2E.GatewayReplicaReserve, about 30 s). Replicas 1 and 2 reach Redis directly, replica 3 through
# a TCP relay (python3, started here) that the test freezes (SIGSTOP: its connections stay open and
# go silent, as in a network partition) and thaws. Under a batch flood through all three and
# interactive traffic through replica 1:
#   - every replica books (holdback_gateway_replica_reserve_active 1, bookings counted), and no
#     server's live bookings exceed its 4 slots while every replica books (configured; sampled in
#     Redis, atomically, over a window in which no replica fell back, lapsed or sent unbooked);
#   - Redis stalled for less than the calls' timeout: interactive requests go out unbooked
#     rather than wait (counted);
#   - replica 3 partitioned: it falls back to the local share within a second and says so, keeps
#     to that share (its live dispatches), the others stay in reserve mode, its heartbeat lapses
#     within the lease (its bookings then count for nobody); thawed, it returns to reserve mode and
#     says so;
#   - replica 2 killed (SIGKILL): its heartbeat is gone within the lease and its booking lists
#     are deleted by the survivors' next bookings;
#   - Redis killed and restarted empty on the same port: the survivors fall back, return to reserve
#     mode, and re-assert their live bookings (the table is rebuilt);
#   - no request through the survivors fails (no 5xx, no transport error), and once the load is
#     over every live gauge is 0 and no booking is left in Redis (consistent afterwards).
# Skipped (exit 0, "SKIPPED:") without redis-server, redis-cli, python3 or hey.
#
#   gateway_replica_reserve_e2e.sh GATEWAY MODEL_SERVER
set -uo pipefail
GATEWAY="$1" MODEL_SERVER="$2"
for tool in redis-server redis-cli python3 hey; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed"; exit 0; }
done
. "$(dirname "$0")/../../scripts/lib/processes.sh"  # WORK, cleanup on exit, start VAR NAME CMD...
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }
ok() { echo "ok: $*"; }
metric() {  # metric URL NAME: the first sample's value
  curl -s --max-time 2 "$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {print $2; exit}'
}
wait_metric() {  # wait_metric URL NAME VALUE SECONDS
  local deadline=$((SECONDS + $4))
  while [ "$SECONDS" -le "$deadline" ]; do
    [ "$(metric "$1" "$2")" = "$3" ] && return 0
    sleep 0.02
  done
  return 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
REDIS_PORT=$(free_port) RELAY_PORT=$(free_port)
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
start_redis() {
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --enable-debug-command local >>"$WORK/redis.out" 2>&1 &
  REDIS_PID=$!
  PIDS+=("$REDIS_PID")
  for _ in $(seq 50); do rcli ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "FAIL: redis-server did not start"; exit 1
}
start_redis
cat >"$WORK/relay.py" <<'EOF'
import asyncio, sys
async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
    except Exception:
        pass
    finally:
        w.close()
async def serve(cr, cw):
    try:
        ur, uw = await asyncio.open_connection("127.0.0.1", int(sys.argv[2]))
    except OSError:
        cw.close()
        return
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw))
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()
asyncio.run(main())
EOF
python3 "$WORK/relay.py" "$RELAY_PORT" "$REDIS_PORT" 2>"$WORK/relay.err" &
RELAY_PID=$!
PIDS+=("$RELAY_PID")
sleep 0.3

start MS1 server1 "$MODEL_SERVER" --port 0 --slots 4 --token-ms 10 --prefill-ms 20 --model fake-model
start MS2 server2 "$MODEL_SERVER" --port 0 --slots 4 --token-ms 10 --prefill-ms 20 --model fake-model
LEASE_MS=300
for g in 1 2 3; do
  port=$REDIS_PORT
  [ "$g" = 3 ] && port=$RELAY_PORT
  start "GW$g" "gateway$g" "$GATEWAY" --endpoint "$MS1,slots=4" --endpoint "$MS2,slots=4" \
    --listen 127.0.0.1:0 \
    --scrape-interval-ms 25 --replica-sync "redis://127.0.0.1:$port" --replica-sync-prefix e2e: \
    --replica-sync-interval-ms 50 --replica-mode reserve --replica-lease-ms "$LEASE_MS"
done
replica_id() { sed -n 's/.*replica reserve: redis [^,]*, replica \([^,]*\), lease.*/\1/p' "$WORK/gateway$1.err" | head -1; }
ID2=$(replica_id 2) ID3=$(replica_id 3)
for g in 1 2 3; do
  url_var="GW$g"
  wait_metric "${!url_var}" holdback_gateway_replica_reserve_active 1 5 ||
    fail "replica $g is not in reserve mode"
done

BODY='{"model":"fake-model","prompt":"hello there","max_tokens":8}'
LOADS=()
load() {  # load NAME URL OBJECTIVE CLIENTS SECONDS
  hey -z "$5s" -c "$4" -t 20 -m POST -T application/json -H "x-gateway-inference-objective: $3" \
    -d "$BODY" "$2/v1/completions" >"$WORK/$1.hey" 2>&1 &
  LOADS+=($!)
}
booked_on() {  # booked_on URL: the live bookings of every replica on one server (one atomic read)
  rcli eval "local n = 0
    for _, r in ipairs(redis.call('SMEMBERS', KEYS[1])) do
      if redis.call('EXISTS', 'e2e:hb:' .. r) == 1 then n = n + redis.call('HLEN', KEYS[1] .. ':' .. r) end
    end
    return n" 1 "e2e:bk:$1"
}
# The load runs until the last check that needs it, then stops (hey prints its report on SIGINT,
# after the requests in flight have ended); LOAD_S bounds it.
LOAD_S=90
load batch1 "$GW1" batch 6 "$LOAD_S"
load batch2 "$GW2" batch 6 "$LOAD_S"
load batch3 "$GW3" batch 6 "$LOAD_S"
load interactive1 "$GW1" interactive 2 "$LOAD_S"
# The bound holds while every replica books: a replica that fell back (a Redis call timed out,
# as on a loaded machine), lapsed (stalled past the lease) or sent a top-band request unbooked (a
# Redis call running past 10 ms, without failing) re-asserts its unbooked dispatches, which may
# exceed a server's slots until they end (docs/design/replicas-redis.md). So the bound is checked
# over a 3 s window in which no replica failed, lapsed or dispatched unbooked, including the second
# before it (those re-assertions end within it); up to three windows.
upsets() {  # every replica's failed Redis calls, lapses and unbooked dispatches so far, one line
  for g in 1 2 3; do
    url_var="GW$g"
    for m in failures lapses fallback_dispatches; do
      printf '%s ' "$(metric "${!url_var}" "holdback_gateway_replica_reserve_${m}_total")"
    done
  done
}
clean=0
for attempt in 1 2 3; do
  before=$(upsets)
  sleep 1
  end=$((SECONDS + 3)) most=0
  while [ "$SECONDS" -lt "$end" ]; do
    for s in "$MS1" "$MS2"; do
      b=$(booked_on "$s")
      [ "$b" -gt "$most" ] && most=$b
    done
  done
  after=$(upsets)
  if [ "$before" = "$after" ]; then
    clean=1
    break
  fi
  echo "note: window $attempt not counted: a replica fell back, lapsed or dispatched unbooked (failures, lapses, unbooked per replica: [$before] -> [$after]; at most $most live bookings)"
done
if [ "$clean" = 0 ]; then
  # A machine too slow for the Redis calls' 50 ms timeout: the bound is not promised, so not
  # checked (the rest of the test still is).
  echo "note: the slot bound not checked: a replica fell back, lapsed or dispatched unbooked in each of three windows"
elif [ "$most" -le 4 ] && [ "$most" -gt 0 ]; then
  ok "at most $most live bookings on a 4-slot server while three replicas booked"
else
  fail "$most live bookings on a 4-slot server while every replica booked (failures, lapses, unbooked per replica: [$after])"
fi
for g in 1 2 3; do
  url_var="GW$g"
  n=$(metric "${!url_var}" holdback_gateway_replica_reserve_bookings_total)
  awk -v n="${n:-0}" 'BEGIN {exit !(n > 0)}' && ok "replica $g booked $n dispatches" ||
    fail "replica $g booked none"
done

# Redis stalled for 35 ms, 40 times (DEBUG SLEEP; shorter than the calls' 50 ms timeout):
# interactive requests through replica 1 submitted once a stall has lasted 10 ms go out unbooked
# at once (counted as dispatches without a booking) though no call failed.
f0=$(metric "$GW1" holdback_gateway_replica_reserve_fallback_dispatches_total)
e0=$(metric "$GW1" holdback_gateway_replica_reserve_failures_total)
for _ in $(seq 40); do rcli debug sleep 0.035 >/dev/null; sleep 0.03; done
f1=$(metric "$GW1" holdback_gateway_replica_reserve_fallback_dispatches_total)
e1=$(metric "$GW1" holdback_gateway_replica_reserve_failures_total)
if [ "$e1" != "$e0" ]; then
  echo "note: stalls not checked: a Redis call of replica 1 failed during them ($e0 -> $e1)"
elif [ "$f1" -gt "$f0" ]; then
  ok "interactive requests did not wait for stalled Redis calls: $((f1 - f0)) sent unbooked"
else
  fail "no interactive request went out unbooked during 40 Redis stalls of 35 ms"
fi

# Replica 3 partitioned from Redis: the relay frozen.
kill -STOP "$RELAY_PID"
t0=$(now_ms)
if wait_metric "$GW3" holdback_gateway_replica_reserve_active 0 2; then
  ok "partitioned replica 3 fell back after $(($(now_ms) - t0)) ms"
else
  fail "partitioned replica 3 did not fall back"
fi
pttl=$(rcli pttl "e2e:hb:$ID3")
sleep "$(awk -v l="$LEASE_MS" -v t="$t0" -v n="$(now_ms)" 'BEGIN {s = (t + l - n) / 1000 + 0.02; print (s > 0 ? s : 0)}')"
if [ "$pttl" -le "$LEASE_MS" ] && [ "$(rcli exists "e2e:hb:$ID3")" = 0 ]; then
  ok "partitioned replica 3's heartbeat ($pttl ms to live after the fallback) lapsed within the lease ($LEASE_MS ms)"
else
  fail "partitioned replica 3's heartbeat: $pttl ms to live, exists $(rcli exists "e2e:hb:$ID3") a lease after the partition"
fi
for g in 1 2; do
  url_var="GW$g"
  [ "$(metric "${!url_var}" holdback_gateway_replica_reserve_active)" = 1 ] &&
    ok "replica $g stayed in reserve mode" || fail "replica $g left reserve mode"
done
grep -q "dispatching on the local 1/R share" "$WORK/gateway3.err" &&
  ok "replica 3 said it fell back" || fail "replica 3 did not say it fell back"
# In fallback replica 3 (batch only) keeps to its share: floor((8 slots - reserve 1) / 3 replicas)
# = 2 live dispatches, once those it booked before the partition have ended (a request takes about
# 100 ms; sampled from 300 ms after the fallback).
sleep "$(awk -v t="$t0" -v n="$(now_ms)" 'BEGIN {s = (t + 300 - n) / 1000; print (s > 0 ? s : 0)}')"
most=0
for _ in $(seq 12); do
  live=$(metric "$GW3" holdback_gateway_replica_reserve_live)
  [ "${live:-0}" -gt "$most" ] && most=${live:-0}
  sleep 0.05
done
[ "$most" -le 2 ] && ok "partitioned replica 3 kept to its share: at most $most live dispatches" ||
  fail "partitioned replica 3 held $most live dispatches, over its share of 2"
sleep 0.3
kill -CONT "$RELAY_PID"
wait_metric "$GW3" holdback_gateway_replica_reserve_active 1 3 &&
  [ "$(grep -c "bookings in force" "$WORK/gateway3.err")" -ge 2 ] &&
  ok "replica 3 returned to reserve mode and said so" || fail "replica 3 did not return"

# Replica 2 killed: its heartbeat's time to live when it died is at most the lease, and it is
# gone once the lease has passed.
kill -9 "$GW2_PID"
pttl=$(rcli pttl "e2e:hb:$ID2")
sleep "$(awk -v l="$LEASE_MS" 'BEGIN {print l / 1000 + 0.02}')"
if [ "$pttl" -gt 0 ] && [ "$pttl" -le "$LEASE_MS" ] && [ "$(rcli exists "e2e:hb:$ID2")" = 0 ]; then
  ok "killed replica 2's heartbeat had $pttl ms to live and is gone after the lease ($LEASE_MS ms)"
else
  fail "killed replica 2's heartbeat: $pttl ms to live at the kill, exists $(rcli exists "e2e:hb:$ID2") after the lease"
fi
sleep 1
left=$(rcli --scan --pattern "e2e:bk:*:$ID2" | wc -l)
[ "$left" = 0 ] && ok "killed replica 2's booking lists deleted" ||
  fail "$left booking lists of killed replica 2 left in Redis"

# Redis killed and restarted empty.
kill -9 "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null
for g in 1 3; do
  url_var="GW$g"
  wait_metric "${!url_var}" holdback_gateway_replica_reserve_active 0 2 ||
    fail "replica $g did not fall back when Redis died"
done
sleep 1
start_redis
for g in 1 3; do
  url_var="GW$g"
  if wait_metric "${!url_var}" holdback_gateway_replica_reserve_active 1 3; then
    ok "replica $g returned to reserve mode after Redis restarted"
  else
    fail "replica $g did not return to reserve mode after Redis restarted"
  fi
done
sleep 0.3
rebuilt=$(($(booked_on "$MS1") + $(booked_on "$MS2")))
[ "$rebuilt" -gt 0 ] && ok "the restarted Redis holds $rebuilt re-asserted bookings" ||
  fail "no booking re-asserted after Redis restarted"

kill -INT "${LOADS[@]}" 2>/dev/null
for pid in "${LOADS[@]}"; do wait "$pid"; done
sleep 0.5
for g in 1 3; do
  url_var="GW$g"
  live=$(metric "${!url_var}" holdback_gateway_replica_reserve_live)
  [ "$live" = 0 ] && ok "replica $g holds no live booking after the load" ||
    fail "replica $g still counts $live live bookings"
done
sleep 0.1
left=$(($(booked_on "$MS1") + $(booked_on "$MS2")))
[ "$left" = 0 ] && ok "no booking left in Redis after the load" || fail "$left bookings left in Redis"
for run in batch1 batch3 interactive1; do
  statuses=$(awk '$1 ~ /^\[[0-9]+\]$/ {printf "%s x%s ", $1, $2}' "$WORK/$run.hey")
  errors=$(awk '/Error distribution:/ {on=1; next} on && NF {gsub(/[][]/, "", $1); n += $1} END {print n + 0}' "$WORK/$run.hey")
  bad=$(awk '$1 ~ /^\[5[0-9][0-9]\]$/ {n += $2} END {print n + 0}' "$WORK/$run.hey")
  if [ "$errors" = 0 ] && [ "$bad" = 0 ] && grep -q '^  \[200\]' "$WORK/$run.hey"; then
    ok "$run: $statuses, no transport error"
  else
    fail "$run: $statuses, $errors transport errors"
    grep -A5 'Error distribution' "$WORK/$run.hey" | head -6
  fi
done
[ "$FAILED" = 0 ] && echo "PASS" || { echo "FAIL: see above"; exit 1; }
