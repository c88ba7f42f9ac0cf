#include "completion.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "footprint.hpp"
#include "holdback/flow/engine_priority.hpp"
#include "holdback/flow/plugins/slo_deadline_ordering.hpp"
#include "holdback/flow/request_headers.hpp"
#include "own_response.hpp"
#include "replica_feed.hpp"

namespace holdback::gateway {

using namespace std::chrono_literals;

namespace {

// A revoked request's one reply (its upstream request is already aborted): 429 `evicted` with
// the JSON error body, or, when the streamed response's head is already out, the same error as a
// final server-sent event and the end of the chunked body (of the connection, for an HTTP/1.0
// client: `chunked` false). Nothing when the client is gone.
Task<bool> answerEvicted(Gateway& gw, TcpStream& stream, Exchange& ex, bool midStream,
                         bool keepAlive, bool chunked = true) {
  gw.counters().evictionsActuated.fetch_add(1, std::memory_order_relaxed);
  if (ex.clientGone) co_return false;
  gw.counters().count(ex.evictedAs.status);
  if (midStream) {
    const std::string event = evictionEvent(ex.evictedAs);
    stream.expires_after(30s);
    if (!chunked) {
      // Whether or not it was written, the connection closes next (that ends the body).
      (void)co_await asio::async_write(stream, asio::buffer(event), kUse);
      stream.expires_never();
      co_return false;
    }
    auto [ec, n] = co_await asio::async_write(stream, http::make_chunk(asio::buffer(event)), kUse);
    if (!ec) std::tie(ec, n) = co_await asio::async_write(stream, http::make_chunk_last(), kUse);
    stream.expires_never();
    co_return !ec && keepAlive;
  }
  Reply r = replyForEviction(ex.evictedAs);
  r.retryAfterS = gw.retryAfter429();
  co_return co_await writeReply(stream, r, keepAlive);
}

// Proxies to the dispatch's endpoint and releases its ledger handle when the upstream exchange
// ends (done, failed, aborted or the client gone).
Task<bool> proxyTo(HttpServer::Shard& shard, TcpStream& stream, Request& req,
                   std::shared_ptr<Exchange> ex, Pool::Dispatch dispatch, long long queuedMs,
                   bool streamed, bool keepAlive, TokenUsage* usage = nullptr,
                   std::optional<Priority> flowPriority = std::nullopt) {
  Gateway& gw = shard.gw;
  const std::size_t endpoint = dispatch.endpoint;
  // An HTTP/1.0 client cannot take a chunked stream: its stream ends with the connection.
  const bool chunked = req.version() >= 11;
  if (streamed && !chunked) keepAlive = false;
  ProxyRequest what{usage,     endpoint, gw.pool().url(endpoint), streamed, queuedMs,
                    keepAlive, chunked};
  if (flowPriority) {  // flow-controlled: the advisory band headroom, read at the response head
    what.bandHeadroom = [&gw, p = *flowPriority]() -> std::optional<std::uint64_t> {
      const auto room = gw.controller().bandHeadroom(p);
      return room ? std::optional<std::uint64_t>(room->requests) : std::nullopt;
    };
  }
  // Its first output: it no longer waits on the server (restoration where a protected request
  // waits, Ticket::markStarted; false, harmless, when no lease is held).
  what.onFirstBody = [&gw, id = ex->ticket.id()] {
    (void)gw.controller().ticket(id).markStarted();
  };
  what.budget = &gw.bufferBudget();
  std::string error;
  unsigned status = 0;
  const ProxyResult r =
      co_await proxy(shard.upstream, gw.options(), req, stream, what, ex->abort, error, status);
  // The upstream exchange is torn down: the ledger's slot and the controller's lease end here (for
  // a revoked request, this release is the confirmation).
  dispatch.release();
  ex->endLease();
  if (ex->revoked && r != ProxyResult::kRevoked && r != ProxyResult::kRevokedMidStream) {
    // The revocation arrived after the upstream response had been read to its end: it completed.
    gw.counters().evictionsTooLate.fetch_add(1, std::memory_order_relaxed);
  }
  switch (r) {
    case ProxyResult::kRevoked:
    case ProxyResult::kRevokedMidStream:
      co_return co_await answerEvicted(gw, stream, *ex, r == ProxyResult::kRevokedMidStream,
                                       keepAlive, chunked);
    case ProxyResult::kDone:
      gw.counters().count(int(status));
      co_return keepAlive;
    case ProxyResult::kTruncated:
      gw.counters().upstreamFailures.fetch_add(1, std::memory_order_relaxed);
      co_return false;
    case ProxyResult::kClientGone:
      co_return false;
    case ProxyResult::kFailedBeforeHead: {
      // 503: the gateway's own limit on connections to the server (upstream.hpp), else 502.
      const unsigned code = status == 503 ? 503u : 502u;
      gw.counters().upstreamFailures.fetch_add(1, std::memory_order_relaxed);
      gw.counters().count(int(code));
      Reply reply = replyForUpstreamFailure(what.endpointUrl, error);
      auto res = ownResponse(code, "application/json", keepAlive, std::move(reply.body));
      res.set(kEndpointHeader, what.endpointUrl);
      if (code == 503) res.set(http::field::retry_after, "1");
      co_return co_await send(stream, res);
    }
  }
  co_return false;
}

}  // namespace

// GCC 12 reports asio's coroutine-frame operator delete as mismatched with its operator new here
// (a false positive: both are awaitable_frame_base's, through asio's recycling allocator); it
// appeared when this function moved out of http_server.cpp's anonymous namespace.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
Task<bool> handleCompletion(HttpServer::Shard& shard, TcpStream& stream, Lookahead& client,
                            Request& req, bool keepAlive, const Tenant* tenant) {
  Gateway& gw = shard.gw;
  GatewayCounters& counters = gw.counters();
  auto reply = [&](Reply r) -> Task<bool> {
    counters.count(r.status);
    co_return co_await writeReply(stream, r, keepAlive);
  };
  const TimePoint received = Clock::now();
  const CompletionBody body = scanCompletionBody(req.body());
  if (!body.object) {
    counters.clientErrors.fetch_add(1, std::memory_order_relaxed);
    // Built before the co_await: GCC 12 destroys a conditional's temporaries twice inside one.
    std::string why = "the request body is not a JSON object";
    if (body.tooDeep) {
      why = "the request body nests arrays and objects more than " +
            std::to_string(kMaxJsonNesting) + " levels deep";
    }
    co_return co_await reply(replyForBadRequest(why));
  }
  Priority priority = gw.options().objectives.priorityOf(req[kObjectiveHeader]);
  std::string flow;
  if (tenant != nullptr) {
    // --api-keys: at most the tenant's ceiling, in the tenant's flow (the headers' ignored).
    const TenantClaim claim = claimFor(*tenant, priority, !req[kObjectiveHeader].empty());
    priority = claim.priority;
    if (claim.clamped) tenant->stats->clamped.fetch_add(1, std::memory_order_relaxed);
    flow = tenant->fairnessId;
  } else {
    flow = flowIdFrom(req[kFairnessIdHeader], req[kFairnessIdHeaderAlias]);
  }
  if (auto bad = checkFairnessId(flow)) {
    counters.clientErrors.fetch_add(1, std::memory_order_relaxed);
    co_return co_await reply(replyForBadRequest(*bad));
  }
  const bool streamed = body.stream;

  if (!gw.pool().anyUp()) {
    Reply r = jsonError(503, "service_unavailable",
                        "no model server is usable: none answered its last metrics scrape");
    r.dropReason = "rejected-no-endpoints";
    r.retryAfterS = gw.retryAfter503();
    co_return co_await reply(std::move(r));
  }

  auto ex = std::make_shared<Exchange>(stream.get_executor(), gw);
  struct Finish {
    Exchange& e;
    Lookahead& client;
    TcpSocket& s;
    ~Finish() {
      e.endLease();  // a dispatched request that was never proxied (or a coroutine unwound)
      e.finished = true;
      endWatch(client, s);
    }
  } finish{*ex, client, stream.socket()};

  if (!gw.bundle().flowControlEnabled) {
    // Legacy (gate off): everything at once, except priority < 0 while saturated.
    std::vector<Endpoint> snapshot;
    gw.pool().snapshot(snapshot);
    const TimePoint now = Clock::now();
    if (priority < 0 && gw.detector().saturation(snapshot, now) >= 1.0) {
      Reply r =
          jsonError(429, "rate_limit_exceeded", "system saturated, sheddable request dropped");
      r.retryAfterS = 1;
      co_return co_await reply(std::move(r));
    }
    auto endpoint = gw.pool().pick(
        gw.detector(), now, declaredFootprint(body, gw.outputEstimator(), priority), priority);
    if (!endpoint) {
      co_return co_await reply(
          replyForOutcome({QueueOutcome::kRejectedNoEndpoints, OutcomeCause::kNoEndpoints}, true));
    }
    ex->done = true;
    watchClient(client, *ex, stream.socket(), counters);
    co_return co_await proxyTo(shard, stream, req, ex, std::move(*endpoint), 0, streamed,
                               keepAlive);
  }

  FlowRequest request;
  request.flowId = flow;
  request.priority = priority;
  // slo-deadline-ordering-policy: received time + the TTFT objective of the SLO header.
  request.receivedTime = received;
  const auto header = [&](std::string_view name) -> std::optional<std::string_view> {
    const auto it = req.find(name);
    if (it == req.end()) return std::nullopt;
    return std::string_view(it->value().data(), it->value().size());
  };
  request.ttftObjective = SloDeadlineOrderingPolicy::ttftFromHeaders(
      header(SloDeadlineOrderingPolicy::kHeader),
      header(SloDeadlineOrderingPolicy::kDeprecatedHeader));
  // x-llm-d-inference-ttl: the caller's queue budget (it can only shorten the configured ones).
  const RequestTtlHeader ttl = parseRequestTtl(header(kRequestTtlHeader));
  if (ttl.status == RequestTtlHeader::Status::kInvalid) {
    co_return co_await reply(jsonError(
        400, "invalid_request_error",
        std::string(kRequestTtlHeader) + ": \"" + std::string(*header(kRequestTtlHeader)) +
            "\" is not a positive duration; use Go spellings such as \"1500ms\" or \"2s\""));
  }
  if (ttl.status == RequestTtlHeader::Status::kValid) {
    request.ttl = ttl.ttl;
    ex->ttl = ttl.ttl;
  }
  request.sizeBytes = req.body().size();
  // The KV footprint: the reservation policy's capacity model and the fitFirst pick read it
  // (max_tokens, or the band's output learned from completions: footprint.hpp).
  request.kvTokens = declaredFootprint(body, gw.outputEstimator(), priority);
  ex->kvTokens = request.kvTokens;
  request.payload = std::shared_ptr<OutcomeSink>(ex);
  gw.dispatcher().arrived();
  if (ReplicaFeedSink* feed = gw.pool().feed()) feed->arrived(priority, request.kvTokens);
  ex->ticket = gw.controller().enqueue(std::move(request));
  gw.dispatcher().dispatchNow();
  watchClient(client, *ex, stream.socket(), counters);
  while (!ex->done) {
    auto [ec] = co_await ex->waiter().async_wait(kUse);
    (void)ec;
  }
  if (!ex->outcome.dispatched() || !ex->dispatch) {
    if (ex->clientGone) co_return false;  // nobody to answer
    const bool pool_empty = gw.controller().poolRegime().empty;
    Reply r = ex->outcome.dispatched()
                  ? replyForOutcome(
                        {QueueOutcome::kRejectedNoEndpoints, OutcomeCause::kNoEndpoints}, true)
                  : replyForOutcome(ex->outcome, pool_empty);
    if (r.status == 429) r.retryAfterS = gw.retryAfter429();
    if (r.status == 503 && r.dropReason == "rejected-no-endpoints") {
      r.retryAfterS = gw.retryAfter503();
    }
    co_return co_await reply(std::move(r));
  }
  if (ex->revoked && !ex->clientGone) {
    // Revoked between its dispatch and the start of its upstream exchange: nothing to abort.
    ex->dispatch.reset();  // releases the ledger handle
    ex->endLease();
    co_return co_await answerEvicted(gw, stream, *ex, false, keepAlive);
  }
  if (ex->clientGone || ex->abort.aborted) {
    // Dispatched just as the client went away: do not spend a model-server slot on it.
    ex->dispatch.reset();  // releases the ledger handle
    ex->endLease();
    counters.queuedCancelled.fetch_add(1, std::memory_order_relaxed);
    co_return false;
  }
  const auto queued_ms = std::chrono::duration_cast<std::chrono::milliseconds>(ex->queued).count();
  Pool::Dispatch dispatch = std::move(*ex->dispatch);
  ex->dispatch.reset();
  if (const EnginePriority engine = gw.bundle().enginePriority; engine != EnginePriority::kOff) {
    // Priority to the engine: the band the request was placed in (band 0 when demoted).
    const auto placed = gw.controller().bandHeadroom(priority);
    if (auto body =
            withEnginePriority(req.body(), placed ? placed->bandPriority : priority, engine)) {
      req.body() = std::move(*body);
    }
  }
  TokenUsage usage;
  // The response's usage is read for program-aware-fairness and, for a request without
  // max_tokens, to learn its band's output (footprint.hpp).
  const bool learn = learnsFootprint(body, true, false);  // the usage, once known, teaches
  const bool keep =
      co_await proxyTo(shard, stream, req, ex, std::move(dispatch), queued_ms, streamed, keepAlive,
                       gw.reportsServedTokens() || learn ? &usage : nullptr, priority);
  if (learnsFootprint(body, usage.known, ex->revoked)) {
    gw.outputEstimator().record(priority, static_cast<double>(usage.completionTokens));
  }
  // program-aware-fairness: the tokens served (a non-streamed body's "usage", a stream's usage
  // event when the client asked for one, else the stream's estimate: StreamUsageScanner).
  if (usage.known && gw.reportsServedTokens()) {
    gw.reportServed(flow, usage.promptTokens, usage.completionTokens, ex->queued);
  }
  co_return keep;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace holdback::gateway
