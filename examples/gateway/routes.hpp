// The routes: the inference paths go to handleCompletion (completion.hpp); GET or HEAD
// /metrics, /healthz, /readyz, /v1/models and /debug/program-aware-fairness are answered here;
// any other method on these paths 405 with Allow, any other path 404.
//
// By listener (ListenerRole): the public listener with --admin-listen serves only the API (the
// inference paths and /v1/models) and /healthz, the admin listener only /metrics, /debug/...,
// /readyz and /healthz; a path the listener does not serve is a 404.
//
// With --api-keys, every path the public listener serves but the probes (/healthz, /readyz)
// needs `Authorization: Bearer KEY` with a key of the table (tenants.hpp), checked before the
// method: without one, 401 with `WWW-Authenticate: Bearer` and the JSON error body (a request
// whose body is still to come is refused on its header already, by the connection loop). The
// Authorization header of an authenticated request is removed: model servers never see
// tenants' keys. The admin listener asks for no key.
//
// Thread safety: thread-compatible (runs on the connection's I/O thread).
#pragma once

#include <string_view>
#include <vector>

#include "completion.hpp"

namespace holdback::gateway {

// Whether a request for `path` (without its query) on a `role` listener needs a tenant's key
// with --api-keys: every path the listener serves but /healthz and /readyz, none on the admin
// listener.
[[nodiscard]] bool needsKey(std::string_view path, ListenerRole role);
// The request's Authorization values (several: refused by authenticate).
[[nodiscard]] std::vector<std::string_view> authorizationOf(const Fields& head);
// The 401 of a failed authentication (kMissing or kInvalid).
[[nodiscard]] Reply unauthorized(TenantDirectory::Check check);

// Routes one request; true to keep the connection. HEAD is answered wherever GET is (the same
// status and headers, no body); a HEAD on a POST route or an unknown path gets the 405 / 404
// headers without their body.
Task<bool> route(HttpServer::Shard& shard, TcpStream& stream, Lookahead& client, Request& req,
                 bool keepAlive, ListenerRole role);

}  // namespace holdback::gateway
