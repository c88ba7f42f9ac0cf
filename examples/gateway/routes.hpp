// The routes: the inference paths go to handleCompletion (completion.hpp); GET or HEAD
// /metrics, /healthz, /readyz, /v1/models and /debug/program-aware-fairness are answered here;
// any other method on these paths 405 with Allow, any other path 404.
//
// Thread safety: thread-compatible (runs on the connection's I/O thread).
#pragma once

#include "completion.hpp"

namespace holdback::gateway {

// Routes one request; true to keep the connection. HEAD is answered wherever GET is (the same
// status and headers, no body); a HEAD on a POST route or an unknown path gets the 405 / 404
// headers without their body.
asio::awaitable<bool> route(HttpServer::Shard& shard, beast::tcp_stream& stream, Lookahead& client,
                            http::request<http::string_body>& req, bool keepAlive);

}  // namespace holdback::gateway
