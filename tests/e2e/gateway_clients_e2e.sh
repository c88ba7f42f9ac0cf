#!/usr/bin/env bash
# End to end with real clients (ctest E2E.GatewayClients): one fake model server, one
# holdback-gateway, and
#   - every error the gateway answers itself (400, 404, 405, 411, 413, 431, 503 not ready) has an
#     OpenAI-style JSON body {"error": {"message", "type", "code"}};
#   - /healthz, /readyz, /v1/models; an idle gateway runs no dispatch cycles;
#   - `promtool check metrics` on /metrics (skipped with a message when promtool, Debian package
#     `prometheus`, is absent);
#   - a streaming client that hangs up: the gateway aborts its upstream request at once and the
#     model server's vllm:num_requests_running returns to 0 (the slot is freed), and the gateway
#     counts it in holdback_gateway_upstream_aborted_total; the same for a non-streaming one;
#   - a queued client that hangs up: its ticket is cancelled (holdback_gateway_queued_cancelled_total);
#   - a connection over --max-connections gets 503 + Retry-After at once;
#   - every model server dead: 503 + Retry-After at once, /readyz 503, /healthz 200;
#   - the official `openai` npm client (installed with npm into NODE_DIR when missing; skipped with a
#     message when node or npm is absent): tests/e2e/gateway_openai_client.mjs.
#
#   gateway_clients_e2e.sh GATEWAY MODEL_SERVER NODE_DIR
# pipefail: a check reads a captured reply with a here-string (grep -q PATTERN <<<"$resp"), not
# `echo "$resp" | grep -q`, whose writer can die of SIGPIPE once grep has matched and exited.
set -uo pipefail
GATEWAY="$1" MODEL_SERVER="$2" NODE_DIR="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$(dirname "$0")/../../scripts/lib/processes.sh"  # WORK, cleanup on exit, start VAR NAME CMD...
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }
ok() { echo "ok: $*"; }

# start VAR NAME CMD...: runs CMD in the background, waits for its "listening on URL" line.
metric() {  # metric URL NAME: the first sample's value
  curl -s "$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {print $2; exit}'
}

start MS model-server "$MODEL_SERVER" --port 0 --slots 1 --token-ms 5 --prefill-ms 5 --model fake-model
start GW gateway "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 --scrape-interval-ms 25 \
  --max-body-bytes 65536 --max-header-bytes 4096

# --- errors the gateway answers itself -------------------------------------------------------
expect_error() {  # expect_error STATUS WHAT CURL-ARGS...
  local want="$1" what="$2"
  shift 2
  local out status body
  out="$(curl -s -o "$WORK/body" -w '%{http_code}' "$@")"
  body="$(cat "$WORK/body")"
  if [ "$out" = "$want" ] && grep -q "\"error\":{\"code\":$want,\"message\":\"[^\"]*\",\"type\":\"[a-z_]*\"}" <<<"$body"; then
    ok "$what -> $want $body"
  else
    fail "$what -> $out $body (want $want with an OpenAI-style error body)"
  fi
}
expect_error 404 "GET /nope" "$GW/nope"
expect_error 405 "GET /v1/completions" "$GW/v1/completions"
expect_error 405 "POST /metrics" -X POST -d x "$GW/metrics"
expect_error 400 "body not JSON" -H 'content-type: application/json' -d 'not json' "$GW/v1/completions"
head -c 100000 /dev/zero | tr '\0' a > "$WORK/big"
expect_error 413 "body over --max-body-bytes" --data-binary "@$WORK/big" "$GW/v1/completions"
expect_error 413 "body over --max-body-bytes, no Content-Type" -H 'Content-Type:' --data-binary "@$WORK/big" "$GW/v1/completions"
expect_error 431 "header over --max-header-bytes" -H "x-big: $(head -c 5000 /dev/zero | tr '\0' a)" "$GW/healthz"
t0=$(date +%s%N)
expect_error 411 "POST without Content-Length" -X POST -H 'Content-Length:' "$GW/v1/completions"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt 1000 ] && ok "411 at once ($(( (t1 - t0) / 1000000 )) ms)" || fail "411 took $(( (t1 - t0) / 1000000 )) ms"
# A malformed request line: 400 with a JSON body.
resp="$(printf 'GARBAGE\r\n\r\n' | timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/${GW##*:}; cat >&3; cat <&3")"
grep -q '^HTTP/1.1 400' <<<"$resp" && grep -q '"error":{"code":400' <<<"$resp" && ok "malformed request line -> 400 JSON" || fail "malformed request line: $resp"
# A transfer coding other than plain chunked (read as chunked, the body would be something else).
resp="$(printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n' |
  timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/${GW##*:}; cat >&3; cat <&3")"
grep -q '^HTTP/1.1 501' <<<"$resp" && grep -q '"error":{"code":501' <<<"$resp" && ok "Transfer-Encoding gzip, chunked -> 501 JSON" || fail "Transfer-Encoding gzip, chunked: $resp"

# --- health, readiness, models -------------------------------------------------------------
[ "$(curl -s -o /dev/null -w '%{http_code}' "$GW/healthz")" = 200 ] && ok "/healthz 200" || fail "/healthz"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$GW/readyz")" = 200 ] && ok "/readyz 200" || fail "/readyz"
grep -q '"id":"fake-model"' <<<"$(curl -s "$GW/v1/models")" && ok "/v1/models lists fake-model" || fail "/v1/models: $(curl -s "$GW/v1/models")"
# HEAD wherever GET is: the GET reply's status and Content-Length, no body; then a GET on the same
# kept-alive connection must read its own reply (a body after the HEAD reply would be read as
# that reply's start). Also a HEAD on a POST route: 405 without a body.
head_then_get() {  # head_then_get PATH: prints the raw bytes of HEAD PATH + GET /healthz on one connection
  printf 'HEAD %s HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' "$1" |
    timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/${GW##*:}; cat >&3; cat <&3" | tr -d '\r'
}
get_len="$(curl -s -o /dev/null -w '%{size_download}' "$GW/healthz")"
resp="$(head_then_get /healthz)"
if head -1 <<<"$resp" | grep -q '^HTTP/1.1 200' && grep -qi "^content-length: $get_len\$" <<<"$resp" &&
   [ "$(echo "$resp" | grep -c '^HTTP/1.1 ')" = 2 ] && [ "$(echo "$resp" | tail -1)" = ok ] &&
   [ "$(echo "$resp" | grep -c '^ok$')" = 1 ]; then
  ok "HEAD /healthz: 200, Content-Length $get_len, no body; the next reply on the connection intact"
else
  fail "HEAD /healthz then GET: $resp"
fi
resp="$(head_then_get /v1/completions)"
if head -1 <<<"$resp" | grep -q '^HTTP/1.1 405' && grep -qi '^allow: POST$' <<<"$resp" &&
   ! grep -q '"error"' <<<"$resp" && [ "$(echo "$resp" | tail -1)" = ok ]; then
  ok "HEAD /v1/completions: 405 with Allow: POST and no body"
else
  fail "HEAD /v1/completions then GET: $resp"
fi
[ "$(curl -s -I -o /dev/null -w '%{http_code}' "$GW/metrics")" = 200 ] && ok "HEAD /metrics 200" || fail "HEAD /metrics"
# Absolute-form request targets (RFC 9112 3.2.2) are routed and proxied as their origin form.
[ "$(curl -s -o /dev/null -w '%{http_code}' --request-target "http://gw.example/healthz" "$GW/healthz")" = 200 ] &&
  ok "absolute-form GET /healthz 200" || fail "absolute-form GET /healthz"
grep -q '"text_completion"' <<<"$(curl -s --request-target "$GW/v1/completions" \
  -H 'Content-Type: application/json' -d '{"model":"fake-model","prompt":"x","max_tokens":1}' \
  "$GW/v1/completions")" &&
  ok "absolute-form POST /v1/completions proxied" || fail "absolute-form POST /v1/completions"
# Hop-by-hop headers stay with the gateway: the fixed ones and those the client's Connection header
# names (RFC 9110 7.6.1); the others reach the model server (its x-received-header-names).
names="$(curl -s -D - -o /dev/null -H 'Content-Type: application/json' -H 'X-Kept: 1' -H 'X-Secret: 1' \
  -H 'Connection: keep-alive, X-Secret' -d '{"model":"fake-model","prompt":"x","max_tokens":1}' \
  "$GW/v1/completions" | tr -d '\r' | sed -n 's/^x-received-header-names: //Ip')"
if echo ",$names," | grep -q ',x-kept,' && ! echo ",$names," | grep -Eq ',(x-secret|connection|keep-alive),'; then
  ok "hop-by-hop headers dropped, others passed on ($names)"
else
  fail "headers the model server received: '$names'"
fi
# vLLM's other JSON inference routes go through flow control to the model server (the fake one
# serves only completions and chat, so its own 404 comes back, from the endpoint the gateway chose).
resp="$(curl -s -i -H 'Content-Type: application/json' -d '{"model":"fake-model","input":"x"}' "$GW/v1/embeddings" | tr -d '\r')"
head -1 <<<"$resp" | grep -q '^HTTP/1.1 404' && grep -qi "^x-holdback-endpoint: $MS\$" <<<"$resp" &&
  ok "POST /v1/embeddings proxied to $MS" || fail "POST /v1/embeddings: $resp"
# A stream to an HTTP/1.0 client is not chunked (RFC 9112 6.1): close-delimited, Connection: close.
resp="$(curl -s -0 --raw -i -N --max-time 10 -H 'Content-Type: application/json' \
  -d '{"model":"fake-model","prompt":"x","max_tokens":2,"stream":true}' "$GW/v1/completions" | tr -d '\r')"
if head -1 <<<"$resp" | grep -q '^HTTP/1.1 200' && ! grep -qi '^transfer-encoding' <<<"$resp" &&
   grep -qi '^connection: close$' <<<"$resp" && [ "$(echo "$resp" | grep -v '^$' | tail -1)" = "data: [DONE]" ]; then
  ok "HTTP/1.0 stream: not chunked, ends with the connection"
else
  fail "HTTP/1.0 stream: $resp"
fi
grep -qi '^allow: GET, HEAD$' <<<"$(curl -s -D - -o /dev/null -X POST -d x "$GW/healthz" | tr -d '\r')" && ok "405 on a GET route allows GET, HEAD" || fail "405 on /healthz: Allow"

# --- an idle gateway does not cycle -------------------------------------------------------------
c0="$(metric "$GW" holdback_flow_control_dispatch_cycles_total)"
sleep 1
c1="$(metric "$GW" holdback_flow_control_dispatch_cycles_total)"
[ "$c0" = "$c1" ] && ok "idle: dispatch cycles stay at $c1 over 1 s" || fail "idle gateway ran $((c1 - c0)) dispatch cycles in 1 s"

# --- promtool --------------------------------------------------------------------------------
curl -s "$GW/v1/completions" -d '{"prompt":"x","max_tokens":1}' >/dev/null
if command -v promtool >/dev/null; then
  if curl -s "$GW/metrics" | promtool check metrics; then ok "promtool check metrics"; else fail "promtool check metrics"; fi
else
  echo "SKIP: promtool not installed (Debian package prometheus): /metrics not checked with promtool"
fi

# --- a departed client's upstream request is aborted -----------------------------------------
aborted0="$(metric "$GW" holdback_gateway_upstream_aborted_total)"
# 400 tokens x 5 ms = 2 s of generation; the client leaves after 0.3 s.
curl -s -N --max-time 0.3 "$GW/v1/completions" -d '{"prompt":"x","max_tokens":400,"stream":true}' >/dev/null
sleep 0.1
running="$(metric "$MS" vllm:num_requests_running)"
aborted1="$(metric "$GW" holdback_gateway_upstream_aborted_total)"
[ "$running" = 0 ] && ok "streaming client left: model server running = 0 within 0.1 s" || fail "streaming client left: model server still running $running"
[ "$aborted1" -gt "$aborted0" ] && ok "upstream_aborted_total $aborted0 -> $aborted1" || fail "upstream_aborted_total $aborted0 -> $aborted1"
curl -s --max-time 0.3 "$GW/v1/completions" -d '{"prompt":"x","max_tokens":400}' >/dev/null
sleep 0.1
running="$(metric "$MS" vllm:num_requests_running)"
aborted2="$(metric "$GW" holdback_gateway_upstream_aborted_total)"
[ "$running" = 0 ] && ok "non-streaming client left: model server running = 0 within 0.1 s" || fail "non-streaming client left: model server still running $running"
[ "$aborted2" -gt "$aborted1" ] && ok "non-streaming client left: upstream_aborted_total $aborted1 -> $aborted2" || fail "non-streaming client left: upstream_aborted_total $aborted1 -> $aborted2"
for _ in $(seq 50); do [ "$(metric "$MS" vllm:num_requests_running)" = 0 ] && break; sleep 0.1; done

# --- a queued client's ticket is cancelled ---------------------------------------------------
# The one slot busy for 2 s with a batch request; a second batch request queues in the gateway
# (batch is gated at saturation 0.5) and its client leaves after 0.5 s.
cancelled0="$(metric "$GW" holdback_gateway_queued_cancelled_total)"
curl -s -o /dev/null --max-time 5 "$GW/v1/completions" -H 'x-gateway-inference-objective: batch' -d '{"prompt":"x","max_tokens":400}' &
HOLDER=$!
sleep 0.3
for i in 1 2 3 4 5 6; do
  curl -s -o /dev/null --max-time 0.5 "$GW/v1/completions" -H 'x-gateway-inference-objective: batch' -d '{"prompt":"x","max_tokens":1}' &
done
wait $HOLDER 2>/dev/null
sleep 0.2
cancelled1="$(metric "$GW" holdback_gateway_queued_cancelled_total)"
queued="$(metric "$GW" holdback_flow_control_queue_size)"
[ "$cancelled1" -gt "$cancelled0" ] && ok "queued clients left: queued_cancelled_total $cancelled0 -> $cancelled1" || fail "queued clients left: queued_cancelled_total $cancelled0 -> $cancelled1"

# --- the official openai client --------------------------------------------------------------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed: the openai npm client check did not run"
else
  if [ ! -d "$NODE_DIR/node_modules/openai" ]; then
    mkdir -p "$NODE_DIR" && (cd "$NODE_DIR" && npm install --no-audit --no-fund --silent openai >/dev/null 2>&1)
  fi
  if [ ! -d "$NODE_DIR/node_modules/openai" ]; then
    echo "SKIP: npm install openai failed (no registry?): the openai npm client check did not run"
  else
    cp "$HERE/gateway_openai_client.mjs" "$NODE_DIR/"
    if node "$NODE_DIR/gateway_openai_client.mjs" "$GW"; then ok "openai npm client"; else fail "openai npm client"; fi
  fi
fi

# --- over --max-connections: 503 + Retry-After at once, not a wait --------------------------------
start GW2 gateway-capped "$GATEWAY" --endpoint "$MS" --listen 127.0.0.1:0 --max-connections 1
exec 5<>"/dev/tcp/127.0.0.1/${GW2##*:}"  # holds the one connection allowed
sleep 0.2
expect_error 503 "a connection over --max-connections 1" --max-time 5 "$GW2/healthz"
grep -qi '^retry-after: 1' <<<"$(curl -s -D - -o /dev/null --max-time 5 "$GW2/healthz")" && ok "shed 503 carries Retry-After" || fail "shed 503 without Retry-After"
exec 5>&-

# --- every model server dead: 503 + Retry-After at once, /readyz 503, /healthz 200 --------------
kill -KILL "${PIDS[0]}"
sleep 0.3
expect_error 503 "/readyz, model server dead" "$GW/readyz"
t0=$(date +%s%N)
expect_error 503 "completion, model server dead" -d '{"prompt":"x","max_tokens":1}' "$GW/v1/completions"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt 1000 ] && ok "503 at once ($(( (t1 - t0) / 1000000 )) ms)" || fail "503 took $(( (t1 - t0) / 1000000 )) ms"
grep -qi '^retry-after: [1-9]' <<<"$(curl -s -D - -o /dev/null -d '{"prompt":"x","max_tokens":1}' "$GW/v1/completions")" && ok "503 carries Retry-After" || fail "503 without Retry-After"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$GW/healthz")" = 200 ] && ok "/healthz still 200" || fail "/healthz with the model server dead"

# --- SIGTERM: exit 0 -------------------------------------------------------------------------
kill -TERM "${PIDS[1]}"
if wait "${PIDS[1]}"; then ok "gateway exited 0 on SIGTERM"; else fail "gateway exit status $? on SIGTERM"; fi
[ "$FAILED" = 0 ] || { echo "--- gateway stderr"; tail -20 "$WORK/gateway.err"; }
exit "$FAILED"
