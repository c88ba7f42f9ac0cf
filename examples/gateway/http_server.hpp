// The client side: the listener and one coroutine per connection (Boost.Beast HTTP/1.1 with
// keep-alive), the routes, and the request path through the flow controller.
//
// Per connection: TCP_NODELAY; wait up to --idle-timeout-s for a request's first byte, then
// --header-timeout-ms for its header (at most --max-header-bytes, else 431) and
// --body-timeout-ms for its body (at most --max-body-bytes, else 413); a POST without
// Content-Length (and not chunked) is answered 411 at once; `Expect: 100-continue` is honoured.
// Every error the gateway answers itself has an OpenAI-style JSON body. Over --max-connections
// open connections, a new one is answered 503 with Retry-After and closed.
//
// Routes: POST /v1/completions, /v1/chat/completions, /v1/embeddings, /v1/responses, /v1/rerank,
// /v1/score (isInferencePath: flow control, then proxied); GET or HEAD /metrics, /healthz
// (liveness), /readyz (200 when at least one model server answered its last scrape), /v1/models;
// any other method on these paths 405 with Allow, any other path 404.
//
// The request path: objective -> priority, fairness id -> flow (gateway_http.hpp); no model server
// usable -> 503 + Retry-After at once; else enqueue, and park the coroutine until the outcome
// arrives (gateway.hpp OutcomeSink). Meanwhile the connection's read of the client's next bytes
// (started once the request was read; it is also the next request's read) is the hang-up watch:
// EOF or an error cancels the queued ticket, or, once proxied, closes the upstream connection
// (upstream.hpp), at once; bytes (a pipelined request) end the watch. Not dispatched -> the
// reference's status and drop reason (429 with Retry-After from the queue state). Dispatched ->
// proxy().
//
// Where each part lives: http_server.cpp the listener and the connection loop (read, lookahead,
// idle timeout, refusals); client_watch.hpp the hang-up watch and the request's rendezvous with
// the controller; routes.hpp the routes and the small endpoints; completion.hpp the request path
// of an inference request; own_response.hpp the replies the gateway writes itself.
//
// With --admin-listen, a second listener (listenAdmin) serves /metrics, /debug/...,
// /readyz and /healthz, and the public one only the API and /healthz (ListenerRole).
//
// Thread safety: one io_context per I/O thread; a connection lives on one thread; the listeners
// run on the first.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "gateway.hpp"
#include "net.hpp"

namespace holdback::gateway {

// What a listener serves: everything (kCombined, without --admin-listen), the API and /healthz
// (kPublic, with --admin-listen), or /metrics, /debug/..., /readyz and /healthz (kAdmin).
enum class ListenerRole { kCombined, kPublic, kAdmin };

class HttpServer {
 public:
  // `contexts`: one per I/O thread (not owned, outlive the server); `targets`: the resolved model
  // servers, in --endpoint order.
  HttpServer(Gateway& gw, std::vector<asio::io_context*> contexts,
             const std::vector<tcp::endpoint>& targets);
  ~HttpServer();

  // Binds and listens (backlog SOMAXCONN); the bound port, or 0 (printed) on failure.
  int listen(const HostPort& where);
  // --admin-listen: the admin listener, the same way (before startAccepting). Its connections
  // are not counted against --max-connections; at most kMaxAdminConnections are open at once.
  int listenAdmin(const HostPort& where);
  static constexpr std::int64_t kMaxAdminConnections = 64;
  void startAccepting();
  // Stops accepting (from any thread); connections in progress go on.
  void stopAccepting();
  // With the I/O threads stopped, before the io_contexts are destroyed: closes the listener and
  // the idle upstream connections.
  void releaseIoObjects();

  struct Shard;

 private:
  Gateway& gw_;
  std::vector<asio::io_context*> contexts_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::unique_ptr<tcp::acceptor> admin_acceptor_;  // --admin-listen
  std::atomic<std::int64_t> admin_open_{0};        // open admin connections
};

}  // namespace holdback::gateway
