#include "http_server.hpp"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "holdback/flow/plugins/slo_deadline_ordering.hpp"
#include "metrics_endpoint.hpp"
#include "upstream.hpp"

namespace holdback::gateway {

using namespace std::chrono_literals;

struct HttpServer::Shard {
  Shard(Gateway& g, asio::io_context& c, std::vector<tcp::endpoint> targets)
      : gw(g), ctx(c), upstream(c.get_executor(), std::move(targets), g.options(), g.counters()) {}
  Gateway& gw;
  asio::io_context& ctx;
  UpstreamPool upstream;
};

namespace {

// One request's rendezvous with the controller (OutcomeSink), its ticket, and what a client
// hang-up or a revocation must undo. Lives on the connection's I/O thread; deliver() and revoke()
// post there.
struct Exchange : OutcomeSink, std::enable_shared_from_this<Exchange> {
  Exchange(const asio::any_io_executor& ex, Gateway& g) : executor(ex), wake(ex), gw(g) {
    wake.expires_at(asio::steady_timer::time_point::max());
  }
  void deliver(Outcome o, std::optional<Pool::Dispatch> d, Duration q) override {
    // The handle travels in a shared_ptr (the posted function must be copyable); if the post
    // never runs, destroying it releases the handle. dispatch, not post: when the outcome is
    // decided on the request's own I/O thread (the usual case: enqueue, or another request's end,
    // cycled inline), it is recorded at once and the coroutine does not suspend for it.
    auto held = std::make_shared<std::optional<Pool::Dispatch>>(std::move(d));
    asio::dispatch(executor, [self = shared_from_this(), o, held, q] {
      self->done = true;
      self->outcome = o;
      self->leaseHeld = o.dispatched();
      self->dispatch = std::move(*held);
      self->queued = q;
      self->wake.cancel();
    });
  }
  void revoke(HttpDisposition disposition) override {
    asio::post(executor, [self = shared_from_this(), disposition] {
      // Too late: the upstream exchange is over (the lease was released: this revocation raced
      // with the natural completion, a failure or the client's hang-up), or the request never
      // held a lease. The release already sent stands.
      if (!self->leaseHeld || self->finished) {
        self->gw.counters().evictionsTooLate.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      self->revoked = true;
      self->evictedAs = disposition;
      self->abort.revoked = true;
      self->abort.abort();  // closes the upstream connection if one is in use
    });
  }
  // The one release of this request's lease (no-op when none is held or it already ended).
  void endLease() {
    if (!leaseHeld) return;
    leaseHeld = false;
    gw.endLease(ticket.id());
  }
  asio::any_io_executor executor;
  asio::steady_timer wake;
  Gateway& gw;
  bool done = false;
  Outcome outcome;
  std::optional<Pool::Dispatch> dispatch;  // the endpoint and its ledger handle
  Duration queued{};
  Ticket ticket;
  bool finished = false;  // the exchange is over: the watch must not touch anything
  bool clientGone = false;
  bool leaseHeld = false;  // dispatched, and endLease() not yet called
  bool revoked = false;    // in-flight eviction revoked it before its upstream exchange ended
  HttpDisposition evictedAs = kEvictedHttp;
  AbortHandle abort;
};

// A client hang-up while its request is queued or proxied: cancels the ticket, or aborts the
// upstream exchange at once (closing the upstream connection), or, between the two, marks the
// exchange aborted so that it is not proxied.
void clientHungUp(Exchange& ex, GatewayCounters& counters) {
  ex.clientGone = true;
  if (!ex.done) {
    if (ex.ticket.cancel()) counters.queuedCancelled.fetch_add(1, std::memory_order_relaxed);
  } else if (ex.abort.active != nullptr) {
    counters.upstreamAborted.fetch_add(1, std::memory_order_relaxed);
    ex.abort.abort();
  } else {
    ex.abort.aborted = true;
  }
}

// The connection's read of the client's next bytes, started as soon as a request has been read
// whole (with no pipelined bytes behind it) and kept in progress while the request is served: it
// is both the hang-up watch and the read of the next request. EOF or an error while an exchange
// is attached (`watching`) is the client's hang-up (clientHungUp); bytes are the next request,
// kept in `bytes` until the session takes them, and end the watch without acting. A client that
// half-closes its sending side after the request is taken as gone (documented). One read for
// both, instead of a readiness wait per request for the watch and another read after the reply,
// saves a system call per request (asio re-arms a readiness wait with epoll_ctl each time).
// When the client's pipelined bytes are already buffered, no read is started (the session parses
// them first): the watch is then a readiness wait with a MSG_PEEK (watchReadiness), cancelled
// when the exchange ends (endWatch: with no read in progress, it is the socket's only operation).
// Shared with the completion handlers, which can run after the session has ended.
struct Lookahead : std::enable_shared_from_this<Lookahead> {
  explicit Lookahead(const asio::any_io_executor& ex) : wake(ex) {}
  std::array<char, 2048> bytes{};
  bool pending = false;   // the read is in progress
  bool complete = false;  // it completed with `ec` and `n`, not yet taken by the session
  beast::error_code ec;
  std::size_t n = 0;
  Exchange* watching = nullptr;  // the exchange a hang-up acts on (set while one is served)
  asio::steady_timer wake;       // the session's wait for the read (with the idle timeout)

  [[nodiscard]] bool hungUp() const {
    return complete && ec && ec != asio::error::operation_aborted;
  }
};

// The watch while pipelined bytes are buffered: waits for the socket to become readable; EOF or an
// error is the hang-up, more bytes end the watch without acting.
void watchReadiness(const std::shared_ptr<Lookahead>& la, tcp::socket& socket,
                    GatewayCounters& counters) {
  socket.async_wait(tcp::socket::wait_read, [la, &socket, &counters](const beast::error_code& ec) {
    // Cancelled (the exchange ended, or the socket closed): `socket` may be gone; touch nothing.
    if (ec || la->watching == nullptr) return;
    char b = 0;
    const ssize_t n = ::recv(socket.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      watchReadiness(la, socket, counters);
      return;
    }
    clientHungUp(*la->watching, counters);
  });
}

// Attaches the exchange being served to the connection's watch: a hang-up already seen acts on
// it at once; a read in progress watches; with neither (pipelined bytes buffered), a readiness
// wait does. Bytes already read (a pipelined request) mean there is nothing to watch.
void watchClient(Lookahead& la, Exchange& ex, tcp::socket& socket, GatewayCounters& counters) {
  la.watching = &ex;
  if (la.hungUp()) {
    clientHungUp(ex, counters);
  } else if (!la.pending && !la.complete) {
    watchReadiness(la.shared_from_this(), socket, counters);
  }
}

// Ends the watch of the exchange being served: the read, if any, goes on as the next request's.
void endWatch(Lookahead& la, tcp::socket& socket) {
  la.watching = nullptr;
  if (!la.pending) {  // no read in progress: cancel() ends the readiness wait, if there is one
    beast::error_code ignored;
    socket.cancel(ignored);
  }
}

void startLookahead(const std::shared_ptr<Lookahead>& la, tcp::socket& socket,
                    GatewayCounters& counters) {
  la->pending = true;
  la->complete = false;
  socket.async_read_some(asio::buffer(la->bytes),
                         [la, &counters](const beast::error_code& ec, std::size_t n) {
                           la->pending = false;
                           la->complete = true;
                           la->ec = ec;
                           la->n = n;
                           if (la->watching != nullptr && la->hungUp())
                             clientHungUp(*la->watching, counters);
                           la->wake.cancel();
                         });
}

Reply jsonError(int status, std::string_view type, std::string_view message) {
  return replyForError(status, type, message);
}

// A reply to HEAD has the headers the GET reply would have, its Content-Length included, and no
// body (RFC 9110 section 9.3.2): a body there would be read as the start of the next response on
// a kept-alive connection.
void omitBodyForHead(http::response<http::string_body>& res, bool head) {
  if (!head) return;
  const std::size_t n = res.body().size();
  res.body().clear();
  res.content_length(n);
}

// A response the gateway writes itself, its body complete.
http::response<http::string_body> ownResponse(unsigned status, std::string_view contentType,
                                              bool keepAlive, std::string body) {
  http::response<http::string_body> res;
  res.version(11);
  res.result(status);
  res.set(http::field::content_type, contentType);
  res.keep_alive(keepAlive);
  res.body() = std::move(body);
  return res;
}

// Frames `res` (Content-Length), drops its body for HEAD and writes it under a 30 s timeout; true
// when it was written and the connection stays open.
asio::awaitable<bool> send(beast::tcp_stream& s, http::response<http::string_body>& res,
                           bool head = false) {
  res.prepare_payload();
  omitBodyForHead(res, head);
  s.expires_after(30s);
  auto [ec, n] = co_await http::async_write(s, res, kUse);
  s.expires_never();
  co_return !ec && res.keep_alive();
}

asio::awaitable<bool> writeReply(beast::tcp_stream& s, const Reply& r, bool keepAlive,
                                 std::string_view allow = {}, bool head = false) {
  auto res = ownResponse(unsigned(r.status), "application/json", keepAlive, r.body);
  if (!r.dropReason.empty()) res.set(kDropReasonHeader, r.dropReason);
  if (r.retryAfterS > 0) res.set(http::field::retry_after, std::to_string(r.retryAfterS));
  if (!allow.empty()) res.set(http::field::allow, allow);
  co_return co_await send(s, res, head);
}

asio::awaitable<bool> writeText(beast::tcp_stream& s, unsigned status, std::string body,
                                std::string_view contentType, bool keepAlive, bool head = false) {
  auto res = ownResponse(status, contentType, keepAlive, std::move(body));
  co_return co_await send(s, res, head);
}

// A revoked request's one reply (its upstream request is already aborted): 429 `evicted` with
// the JSON error body, or, when the streamed response's head is already out, the same error as a
// final server-sent event and the end of the chunked body (of the connection, for an HTTP/1.0
// client: `chunked` false). Nothing when the client is gone.
asio::awaitable<bool> answerEvicted(Gateway& gw, beast::tcp_stream& stream, Exchange& ex,
                                    bool midStream, bool keepAlive, bool chunked = true) {
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
asio::awaitable<bool> proxyTo(HttpServer::Shard& shard, beast::tcp_stream& stream,
                              http::request<http::string_body>& req, std::shared_ptr<Exchange> ex,
                              Pool::Dispatch dispatch, long long queuedMs, bool streamed,
                              bool keepAlive, TokenUsage* usage = nullptr) {
  Gateway& gw = shard.gw;
  const std::size_t endpoint = dispatch.endpoint;
  // An HTTP/1.0 client cannot take a chunked stream: its stream ends with the connection.
  const bool chunked = req.version() >= 11;
  if (streamed && !chunked) keepAlive = false;
  ProxyRequest what{usage,     endpoint, gw.pool().url(endpoint), streamed, queuedMs,
                    keepAlive, chunked};
  std::string error;
  unsigned status = 0;
  const ProxyResult r =
      co_await proxy(shard.upstream, gw.options(), req, stream, what, ex->abort, error, status);
  // The upstream exchange is torn down: the ledger's slot and the controller's lease end here (for
  // a revoked request, this release is the confirmation).
  dispatch.handle.release();
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
      gw.counters().upstreamFailures.fetch_add(1, std::memory_order_relaxed);
      gw.counters().count(502);
      Reply reply = replyForUpstreamFailure(what.endpointUrl, error);
      auto res = ownResponse(502u, "application/json", keepAlive, std::move(reply.body));
      res.set(kEndpointHeader, what.endpointUrl);
      co_return co_await send(stream, res);
    }
  }
  co_return false;
}

asio::awaitable<bool> handleCompletion(HttpServer::Shard& shard, beast::tcp_stream& stream,
                                       Lookahead& client, http::request<http::string_body>& req,
                                       bool keepAlive) {
  Gateway& gw = shard.gw;
  GatewayCounters& counters = gw.counters();
  auto reply = [&](Reply r) -> asio::awaitable<bool> {
    counters.count(r.status);
    co_return co_await writeReply(stream, r, keepAlive);
  };
  const TimePoint received = Clock::now();
  const CompletionBody body = scanCompletionBody(req.body());
  if (!body.object) {
    counters.clientErrors.fetch_add(1, std::memory_order_relaxed);
    co_return co_await reply(replyForBadRequest("the request body is not a JSON object"));
  }
  const Priority priority = gw.options().objectives.priorityOf(req[kObjectiveHeader]);
  std::string flow = flowIdFrom(req[kFairnessIdHeader], req[kFairnessIdHeaderAlias]);
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
    tcp::socket& s;
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
    auto endpoint = gw.pool().pick(gw.detector(), now);
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
  request.sizeBytes = req.body().size();
  request.payload = std::shared_ptr<OutcomeSink>(ex);
  gw.dispatcher().arrived();
  ex->ticket = gw.controller().enqueue(std::move(request));
  gw.dispatcher().dispatchNow();
  watchClient(client, *ex, stream.socket(), counters);
  while (!ex->done) {
    auto [ec] = co_await ex->wake.async_wait(kUse);
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
  TokenUsage usage;
  const bool keep =
      co_await proxyTo(shard, stream, req, ex, std::move(dispatch), queued_ms, streamed, keepAlive,
                       gw.reportsServedTokens() ? &usage : nullptr);
  // program-aware-fairness: the tokens served (a non-streamed body's "usage", a stream's usage
  // event when the client asked for one, else the stream's estimate: StreamUsageScanner).
  if (usage.known) gw.reportServed(flow, usage.promptTokens, usage.completionTokens, ex->queued);
  co_return keep;
}

std::string modelsBody(const Gateway& gw) {
  nlohmann::json data = nlohmann::json::array();
  for (const std::string& id : gw.models()) {
    data.push_back({{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "holdback"}});
  }
  return nlohmann::json({{"object", "list"}, {"data", data}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Routes one request; true to keep the connection. HEAD is answered wherever GET is (the same
// status and headers, no body); a HEAD on a POST route or an unknown path gets the 405 / 404
// headers without their body.
asio::awaitable<bool> route(HttpServer::Shard& shard, beast::tcp_stream& stream, Lookahead& client,
                            http::request<http::string_body>& req, bool keepAlive) {
  Gateway& gw = shard.gw;
  std::string_view path = req.target();
  if (const auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  const bool post = req.method() == http::verb::post;
  const bool head = req.method() == http::verb::head;
  const bool get = req.method() == http::verb::get || head;
  auto clientError = [&](int status, std::string_view type, std::string message,
                         std::string_view allow = {}) -> asio::awaitable<bool> {
    gw.counters().clientErrors.fetch_add(1, std::memory_order_relaxed);
    co_return co_await writeReply(stream, jsonError(status, type, message), keepAlive, allow, head);
  };
  // 405 with the methods the path takes (`allow`; the message says "use `use`").
  auto methodNotAllowed = [&](std::string_view allow, std::string_view use) {
    return clientError(405, "invalid_request_error",
                       "method " + std::string(req.method_string()) + " not allowed on " +
                           std::string(path) + "; use " + std::string(use),
                       allow);
  };
  if (isInferencePath(path)) {
    if (!post) co_return co_await methodNotAllowed("POST", "POST");
    co_return co_await handleCompletion(shard, stream, client, req, keepAlive);
  }
  if (path == "/metrics" || path == "/healthz" || path == "/readyz" || path == "/v1/models" ||
      path == "/debug/program-aware-fairness") {
    if (!get) co_return co_await methodNotAllowed("GET, HEAD", "GET or HEAD");
    const auto text = [&](std::string body, std::string_view type) {
      return writeText(stream, 200, std::move(body), type, keepAlive, head);
    };
    if (path == "/metrics") {
      co_return co_await text(renderMetrics(gw), "text/plain; version=0.0.4; charset=utf-8");
    }
    if (path == "/healthz") co_return co_await text("ok", "text/plain");
    if (path == "/debug/program-aware-fairness") {
      co_return co_await text(gw.programAwareState(), "application/json");
    }
    if (path == "/v1/models") co_return co_await text(modelsBody(gw), "application/json");
    if (gw.pool().anyUp()) co_return co_await text("ready", "text/plain");
    Reply r = jsonError(503, "service_unavailable",
                        "not ready: no model server answered its last metrics scrape");
    r.retryAfterS = gw.retryAfter503();
    co_return co_await writeReply(stream, r, keepAlive, {}, head);
  }
  co_return co_await clientError(404, "invalid_request_error", "no route for " + std::string(path));
}

// The status and message for a request the parser refused.
Reply parseErrorReply(const beast::error_code& ec) {
  if (ec == http::error::header_limit) {
    return jsonError(431, "invalid_request_error", "request header too large");
  }
  if (ec == http::error::body_limit) {
    return jsonError(413, "invalid_request_error", "request body too large");
  }
  return jsonError(400, "invalid_request_error", "malformed HTTP request: " + ec.message());
}

bool isDisconnect(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == asio::error::broken_pipe || ec == asio::error::bad_descriptor;
}

// A read of a request's head or body failed: a timeout (counted) or a disconnect ends the
// connection quietly (false); anything else is a malformed or oversized request, answered with
// its 4xx (true: the connection is drained before it is closed, see lingeringClose).
asio::awaitable<bool> answerFailedRead(beast::tcp_stream& stream, const beast::error_code& ec,
                                       GatewayCounters& counters) {
  if (ec == beast::error::timeout) {
    counters.clientTimeouts.fetch_add(1, std::memory_order_relaxed);
    co_return false;
  }
  if (isDisconnect(ec)) co_return false;
  counters.clientErrors.fetch_add(1, std::memory_order_relaxed);
  co_await writeReply(stream, parseErrorReply(ec), false);
  co_return true;
}

// Closes a connection whose request was refused before it was read in full (413, 431, 400,
// 411, or the connection cap): stop sending, then read and discard what the client is still
// sending (for at most `limit` and 4 MiB), so that it reads the reply instead of a reset. Closing
// a socket with unread input makes the kernel send RST, which can reach the client before it has
// read the reply (curl then reports no status at all).
asio::awaitable<void> lingeringClose(beast::tcp_stream& stream, std::chrono::milliseconds limit) {
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  std::array<char, 4096> sink{};
  std::size_t drained = 0;
  stream.expires_after(limit);
  while (drained < std::size_t{4} * 1024 * 1024) {
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(sink), kUse);
    if (ec) break;
    drained += n;
  }
  stream.close();
}

asio::awaitable<void> session(HttpServer::Shard& shard, tcp::socket socket) {
  Gateway& gw = shard.gw;
  GatewayCounters& counters = gw.counters();
  struct Open {
    GatewayCounters& c;
    ~Open() { c.connectionsOpen.fetch_sub(1, std::memory_order_relaxed); }
  } open{counters};
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  socket.non_blocking(true, ignored);  // proxy()'s replies try one immediate send first
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  const auto client = std::make_shared<Lookahead>(stream.get_executor());
  const Options& o = gw.options();
  bool refused = false;  // an error reply to a request that was not read in full
  for (;;) {
    // Idle: wait for the first bytes of the next request (the lookahead read, started when the
    // previous request had been read, or now), for at most --idle-timeout-s.
    if (buffer.size() == 0) {
      if (!client->pending && !client->complete) startLookahead(client, stream.socket(), counters);
      bool timed_out = false;
      if (client->pending) {
        client->wake.expires_after(std::chrono::seconds(o.idleTimeoutS));
        while (client->pending) {  // the read's completion cancels the wait
          auto [wec] = co_await client->wake.async_wait(kUse);
          if (!wec && client->pending) {  // the timer ran out first
            timed_out = true;
            break;
          }
        }
      }
      if (timed_out) {
        counters.clientTimeouts.fetch_add(1, std::memory_order_relaxed);
        break;  // closing the socket ends the read
      }
      client->complete = false;
      if (client->ec) break;  // the client closed the connection (or it failed)
      const std::size_t n = client->n;
      std::memcpy(buffer.prepare(n).data(), client->bytes.data(), n);
      buffer.commit(n);
    }
    http::request_parser<http::string_body> parser;
    parser.header_limit(std::uint32_t(o.maxHeaderBytes));
    parser.body_limit(o.maxBodyBytes);
    stream.expires_after(std::chrono::milliseconds(o.headerTimeoutMs));
    auto [hec, hn] = co_await http::async_read_header(stream, buffer, parser, kUse);
    if (hec) {
      refused = co_await answerFailedRead(stream, hec, counters);
      break;
    }
    auto& head = parser.get();
    if (head.method() == http::verb::post && !parser.chunked() &&
        !parser.content_length().has_value()) {
      counters.clientErrors.fetch_add(1, std::memory_order_relaxed);
      co_await writeReply(stream,
                          jsonError(411, "invalid_request_error",
                                    "POST needs a Content-Length header (or chunked encoding)"),
                          false);
      refused = true;
      break;
    }
    if (!parser.is_done()) {
      if (beast::iequals(head[http::field::expect], "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, 11};
        stream.expires_after(std::chrono::milliseconds(o.bodyTimeoutMs));
        auto [cec, cn] = co_await http::async_write(stream, cont, kUse);
        if (cec) break;
      }
      stream.expires_after(std::chrono::milliseconds(o.bodyTimeoutMs));
      auto [bec, bn] = co_await http::async_read(stream, buffer, parser, kUse);
      if (bec) {
        refused = co_await answerFailedRead(stream, bec, counters);
        break;
      }
    }
    stream.expires_never();
    http::request<http::string_body> req = parser.release();
    // Absolute form (RFC 9112 section 3.2.2) is routed, and proxied, as its origin form.
    if (const std::string_view origin = originForm(req.target()); origin != req.target()) {
      req.target(std::string(origin));
    }
    const bool keep_alive = req.keep_alive();
    // Read on while the request is served: the hang-up watch, and the next request's first bytes
    // (with pipelined bytes buffered, the watch is a readiness wait: watchClient).
    if (buffer.size() == 0) startLookahead(client, stream.socket(), counters);
    counters.exchangesInProgress.fetch_add(1, std::memory_order_relaxed);
    const bool keep = co_await route(shard, stream, *client, req, keep_alive);
    counters.exchangesInProgress.fetch_sub(1, std::memory_order_relaxed);
    if (!keep) break;
  }
  if (refused) {
    co_await lingeringClose(stream, 1s);
    co_return;
  }
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream.close();
}

// Over the connection cap: a 503 with Retry-After, then close (after a short drain of what the
// client sent, so that it reads the reply instead of a reset).
asio::awaitable<void> shed(tcp::socket socket) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  beast::tcp_stream stream(std::move(socket));
  Reply r = jsonError(503, "service_unavailable",
                      "too many open connections to the gateway; retry later");
  r.retryAfterS = 1;
  co_await writeReply(stream, r, false);
  co_await lingeringClose(stream, 1s);
}

}  // namespace

HttpServer::HttpServer(Gateway& gw, std::vector<asio::io_context*> contexts,
                       const std::vector<tcp::endpoint>& targets)
    : gw_(gw), contexts_(std::move(contexts)) {
  for (asio::io_context* c : contexts_) shards_.push_back(std::make_unique<Shard>(gw, *c, targets));
}

HttpServer::~HttpServer() = default;

int HttpServer::listen(const HostPort& where) {
  beast::error_code ec;
  const auto address =
      asio::ip::make_address(where.host == "localhost" ? "127.0.0.1" : where.host, ec);
  if (ec) {
    std::fprintf(stderr, "holdback-gateway: --listen: \"%s\" is not an IP address\n",
                 where.host.c_str());
    return 0;
  }
  acceptor_ = std::make_unique<tcp::acceptor>(*contexts_.front());
  const tcp::endpoint ep(address, static_cast<unsigned short>(where.port));
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "holdback-gateway: cannot listen on %s:%d: %s\n", where.host.c_str(),
                 where.port, ec.message().c_str());
    return 0;
  }
  return acceptor_->local_endpoint().port();
}

void HttpServer::startAccepting() {
  asio::co_spawn(
      *contexts_.front(),
      [this]() -> asio::awaitable<void> {
        std::size_t next = 0;
        for (;;) {
          Shard& shard = *shards_[next++ % shards_.size()];
          auto [ec, socket] = co_await acceptor_->async_accept(shard.ctx, kUse);
          if (ec == asio::error::operation_aborted || !acceptor_->is_open()) co_return;
          if (ec) {  // e.g. out of file descriptors: back off briefly
            asio::steady_timer t(co_await asio::this_coro::executor, 10ms);
            co_await t.async_wait(kUse);
            continue;
          }
          GatewayCounters& c = gw_.counters();
          if (c.connectionsOpen.load(std::memory_order_relaxed) >= gw_.options().maxConnections) {
            c.connectionsShed.fetch_add(1, std::memory_order_relaxed);
            asio::co_spawn(shard.ctx, shed(std::move(socket)), asio::detached);
            continue;
          }
          c.connectionsOpen.fetch_add(1, std::memory_order_relaxed);
          asio::co_spawn(shard.ctx, session(shard, std::move(socket)), asio::detached);
        }
      },
      asio::detached);
}

void HttpServer::releaseIoObjects() {
  acceptor_.reset();
  for (auto& s : shards_) s->upstream.clear();
}

void HttpServer::stopAccepting() {
  asio::post(*contexts_.front(), [this] {
    beast::error_code ec;
    acceptor_->close(ec);
  });
}

}  // namespace holdback::gateway
