// The request path of an inference request (POST /v1/completions and the other
// isInferencePath routes): objective -> priority, fairness id -> flow; no model server usable ->
// 503 + Retry-After at once; else enqueue through the flow controller and park until the outcome
// arrives, with the client watched for a hang-up meanwhile (client_watch.hpp); not dispatched ->
// the reference's status and drop reason; dispatched -> proxied (upstream.hpp), or answered 429
// `evicted` when in-flight eviction revokes it.
//
// Thread safety: thread-compatible (runs on the connection's I/O thread).
#pragma once

#include "client_watch.hpp"
#include "http_message.hpp"
#include "http_server.hpp"
#include "net.hpp"

namespace holdback::gateway {

// The part of the server that belongs to one I/O thread: its io_context and the upstream
// connections opened from it.
struct HttpServer::Shard {
  Shard(Gateway& g, asio::io_context& c, std::vector<tcp::endpoint> targets)
      : gw(g), ctx(c), upstream(c.get_executor(), std::move(targets), g.options(), g.counters()) {}
  Gateway& gw;
  asio::io_context& ctx;
  UpstreamPool upstream;
};

// Serves one inference request and writes its reply; true to keep the connection. `tenant`
// (with --api-keys; outlives the call): the objective's priority is lowered to the tenant's
// ceiling and the flow is the tenant's fairness id (tenants.hpp claimFor).
Task<bool> handleCompletion(HttpServer::Shard& shard, TcpStream& stream, Lookahead& client,
                            Request& req, bool keepAlive, const Tenant* tenant = nullptr);

}  // namespace holdback::gateway
