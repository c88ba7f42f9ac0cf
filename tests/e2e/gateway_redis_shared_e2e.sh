#!/usr/bin/env bash
# End to end: holdback-gateway replicas on a Redis shared with others and written by others
# (ctest E2E.GatewayRedisShared, a few seconds). One redis-server with requirepass (started here
# on a free port), one fake model server, and three gateways that reach it with the password in
# the URL: two of fleet A (--replica-sync-prefix e2e-a:) and one of fleet B (e2e-b:). Checks:
#   - the password works (AUTH on connect) and is printed nowhere;
#   - a wrong password is a failed round that says why (the server's AUTH error), password unsaid;
#   - the two fleets do not see each other: A's replicas count 2, B's 1; every key is under a
#     prefix; B's feed applies none of A's events;
#   - values injected with redis-cli are ignored and counted in
#     holdback_gateway_replica_sync_rejected_total{reason}: a fake replica with the right
#     fingerprint whose @restore carries an interactive queue head enqueued in 1970 (taken, it
#     made every replica leave its interactive dispatches to that replica: no interactive request
#     was served) and whose pending work is negative; a replica of another fingerprint
#     (holdback_gateway_replica_sync_foreign_replicas, logged once); a key of the wrong type; feed
#     events out of range. A's replicas still count 2 and interactive requests are served.
# Skipped (exit 0, "SKIPPED:") when redis-server or redis-cli is not installed.
#
#   gateway_redis_shared_e2e.sh GATEWAY MODEL_SERVER
set -uo pipefail
GATEWAY="$1" MODEL_SERVER="$2"
for tool in redis-server redis-cli; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIPPED: $tool not installed (apt-get install redis-server redis-tools)"
    exit 0
  fi
done
. "$(dirname "$0")/../../scripts/lib/processes.sh"  # WORK, cleanup on exit, start VAR NAME CMD...
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }
ok() { echo "ok: $*"; }
metric() {  # metric URL NAME[{LABELS}]: the first sample's value
  curl -s --max-time 2 "$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {print $2; exit}'
}
wait_metric() {  # wait_metric URL NAME VALUE SECONDS: true once the metric reads VALUE
  local deadline=$((SECONDS + $4))
  while [ "$SECONDS" -le "$deadline" ]; do
    [ "$(metric "$1" "$2")" = "$3" ] && return 0
    sleep 0.05
  done
  return 1
}
wait_positive() {  # wait_positive URL NAME SECONDS: true once the metric reads more than 0
  local deadline=$((SECONDS + $3)) v
  while [ "$SECONDS" -le "$deadline" ]; do
    v=$(metric "$1" "$2")
    awk -v v="${v:-0}" 'BEGIN {exit !(v > 0)}' && return 0
    sleep 0.05
  done
  return 1
}
request() {  # request URL OBJECTIVE: the HTTP status of one completion (000: none in 5 s)
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "x-gateway-inference-objective: $2" \
    -H 'content-type: application/json' \
    -d '{"model":"fake-model","prompt":"hello","max_tokens":4}' "$1/v1/completions"
}

PASSWORD="e2e-pw-$RANDOM$RANDOM"
REDIS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --requirepass "$PASSWORD" >"$WORK/redis.out" 2>&1 &
PIDS+=("$!")
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT") 2>/dev/null && break
  sleep 0.1
done
rcli() { REDISCLI_AUTH="$PASSWORD" redis-cli -p "$REDIS_PORT" "$@"; }
URL="redis://:$PASSWORD@127.0.0.1:$REDIS_PORT"

start MS server "$MODEL_SERVER" --port 0 --slots 4 --token-ms 5 --prefill-ms 5 --model fake-model
SYNC=(--scrape-interval-ms 25 --replica-sync-interval-ms 20 --replica-sync-ttl-ms 1000)
start A1 gateway-a1 "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 "${SYNC[@]}" \
  --replica-sync "$URL" --replica-sync-prefix e2e-a:
start A2 gateway-a2 "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 "${SYNC[@]}" \
  --replica-sync "$URL" --replica-sync-prefix e2e-a:
start B1 gateway-b1 "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 "${SYNC[@]}" \
  --replica-sync "$URL" --replica-sync-prefix e2e-b:
start W1 gateway-wrong "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 "${SYNC[@]}" \
  --replica-sync "redis://:not-$PASSWORD@127.0.0.1:$REDIS_PORT" --replica-sync-prefix e2e-w:

# --- AUTH, and two fleets on one Redis --------------------------------------------------------
if wait_metric "$A1" holdback_gateway_replica_sync_replicas 2 5 &&
  wait_metric "$A2" holdback_gateway_replica_sync_replicas 2 5; then
  ok "fleet A's two replicas see each other through the password-protected Redis"
else
  fail "fleet A's replicas see $(metric "$A1" holdback_gateway_replica_sync_replicas) and" \
    "$(metric "$A2" holdback_gateway_replica_sync_replicas) replicas, not 2"
fi
if wait_metric "$B1" holdback_gateway_replica_sync_replicas 1 3 &&
  [ "$(metric "$B1" holdback_gateway_replica_sync_fallback)" = 0 ]; then
  ok "fleet B's replica shares with 1 replica (itself): it does not see fleet A"
else
  fail "fleet B's replica sees $(metric "$B1" holdback_gateway_replica_sync_replicas) replicas"
fi
if wait_metric "$W1" holdback_gateway_replica_sync_fallback 1 3 &&
  grep -q "failed (AUTH: WRONGPASS" "$WORK/gateway-wrong.err"; then
  ok "a wrong password is a failed round that says so"
else
  fail "a wrong password: fallback $(metric "$W1" holdback_gateway_replica_sync_fallback)"
  cat "$WORK/gateway-wrong.err"
fi
keys=$(rcli --scan | sort)
if grep -q '^e2e-a:replicas$' <<<"$keys" && grep -q '^e2e-b:replicas$' <<<"$keys" &&
  ! grep -qv '^e2e-[ab]:' <<<"$keys"; then
  ok "every key is under a fleet's prefix: $(tr '\n' ' ' <<<"$keys")"
else
  fail "keys outside the prefixes: $(tr '\n' ' ' <<<"$keys")"
fi
for r in $(seq 5); do request "$A1" batch >/dev/null; done
if wait_positive "$A2" holdback_gateway_replica_feed_received_total 3 &&
  [ "$(metric "$B1" holdback_gateway_replica_feed_received_total)" = 0 ]; then
  ok "fleet A's feed reaches A's other replica and not fleet B"
else
  fail "feed received: A2 $(metric "$A2" holdback_gateway_replica_feed_received_total)," \
    "B1 $(metric "$B1" holdback_gateway_replica_feed_received_total)"
fi

# --- values injected into fleet A's keys ------------------------------------------------------
self=$(rcli ZRANGE e2e-a:replicas 0 0)
FP=$(rcli HGET "e2e-a:replica:$self" @fingerprint)
if [[ "$FP" =~ ^[0-9a-f]{16}$ ]]; then
  ok "replicas publish their config fingerprint ($FP)"
else
  fail "no fingerprint in e2e-a:replica:$self: \"$FP\""
fi
# A replica of fleet A's fingerprint whose interactive queue head was enqueued in 1970 and whose
# pending work is negative; one of another fingerprint; a key that is not a hash. Scores far
# ahead keep them in the replica set.
rcli HSET e2e-a:replica:evil-1-1 "$MS" "-5 99999999999999999999" @restore "0 0 0 0 0 0 1 10 0" \
  @fingerprint "$FP" >/dev/null
rcli HSET e2e-a:replica:alien-2-2 "$MS" "1 100" @restore "1 1 1 1" @fingerprint 0123456789abcdef \
  >/dev/null
rcli SET e2e-a:replica:string-3-3 "not a hash" >/dev/null
FAR=99999999999999
rcli ZADD e2e-a:replicas "$FAR" evil-1-1 "$FAR" alien-2-2 "$FAR" string-3-3 >/dev/null
# Feed events out of range, published until fleet A's first replica has heard them (a message
# published while its subscriber reconnects is not delivered).
for _ in $(seq 30); do
  rcli PUBLISH e2e-a:feed "$(printf 'evil-1-1 %s\nD -5 %s\nA 5 2147483648' "$FP" "$MS")" >/dev/null
  v=$(metric "$A1" 'holdback_gateway_replica_sync_rejected_total{reason="out_of_range"}')
  [ "${v:-0}" != 0 ] && break
  sleep 0.1
done
rejected() { metric "$1" "holdback_gateway_replica_sync_rejected_total{reason=\"$2\"}"; }
for reason in time negative wrong_type fingerprint out_of_range; do
  if wait_positive "$A1" "holdback_gateway_replica_sync_rejected_total{reason=\"$reason\"}" 3; then
    ok "injected values ignored and counted: reason=\"$reason\" $(rejected "$A1" "$reason")"
  else
    fail "nothing counted for reason=\"$reason\""
  fi
done
if wait_metric "$A1" holdback_gateway_replica_sync_foreign_replicas 1 3 &&
  [ "$(grep -c 'ignoring replica alien-2-2' "$WORK/gateway-a1.err")" = 1 ]; then
  ok "the replica of another fingerprint is ignored, shown and logged once"
else
  fail "foreign replicas $(metric "$A1" holdback_gateway_replica_sync_foreign_replicas);" \
    "log lines: $(grep -c 'ignoring replica alien' "$WORK/gateway-a1.err")"
fi
sleep 0.3  # several rounds with the injected values
if [ "$(metric "$A1" holdback_gateway_replica_sync_replicas)" = 2 ] &&
  [ "$(metric "$A1" holdback_gateway_replica_sync_fallback)" = 0 ]; then
  ok "fleet A still counts 2 replicas and its rounds succeed"
else
  fail "fleet A counts $(metric "$A1" holdback_gateway_replica_sync_replicas) replicas," \
    "fallback $(metric "$A1" holdback_gateway_replica_sync_fallback)"
fi
lines=$(grep -c 'ignored a value read from Redis (time)' "$WORK/gateway-a1.err")
if [ "$lines" = 1 ]; then
  ok "the rejections are logged once per reason, not per round"
else
  fail "$lines log lines for reason time"
fi
statuses=""
for r in 1 2 3; do statuses+="$(request "$A1" interactive) $(request "$A2" interactive) "; done
if [ "$statuses" = "200 200 200 200 200 200 " ]; then
  ok "interactive requests are served beside the injected queue head: $statuses"
else
  fail "interactive requests beside the injected queue head: $statuses"
fi

# --- the password is printed nowhere ----------------------------------------------------------
"$GATEWAY" --help >"$WORK/help.out" 2>&1
"$GATEWAY" --endpoint "$MS" --replica-sync "redis://:$PASSWORD@127.0.0.1:0" \
  >"$WORK/bad-url.out" 2>&1
if grep -l -- "$PASSWORD" "$WORK"/gateway-*.err "$WORK"/gateway-*.out "$WORK/help.out" \
  "$WORK/bad-url.out" >/dev/null; then
  fail "the password is printed in" "$(grep -l -- "$PASSWORD" "$WORK"/*.err "$WORK"/*.out)"
else
  ok "the password is in no output (logs, --help, a bad URL's error)"
fi
if curl -s "$A1/metrics" | grep -q -- "$PASSWORD"; then fail "the password is in /metrics"; fi

[ "$FAILED" = 0 ] && echo "PASS" || { echo "FAIL: see above"; exit 1; }
