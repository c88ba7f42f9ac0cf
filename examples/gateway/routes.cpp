#include "routes.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics_endpoint.hpp"
#include "own_response.hpp"

namespace holdback::gateway {

namespace {

std::string modelsBody(const Gateway& gw) {
  nlohmann::json data = nlohmann::json::array();
  for (const std::string& id : gw.models()) {
    data.push_back({{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "holdback"}});
  }
  return nlohmann::json({{"object", "list"}, {"data", data}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The paths each listener serves.
bool isApiPath(std::string_view path) {
  return isInferencePath(path) || path == "/v1/models";
}
bool isAdminPath(std::string_view path) {
  return path == "/metrics" || path == "/readyz" || path == "/debug/program-aware-fairness";
}
bool serves(std::string_view path, ListenerRole role) {
  return path == "/healthz" || (isApiPath(path) && role != ListenerRole::kAdmin) ||
         (isAdminPath(path) && role != ListenerRole::kPublic);
}

}  // namespace

bool needsKey(std::string_view path, ListenerRole role) {
  return role != ListenerRole::kAdmin && serves(path, role) && path != "/healthz" &&
         path != "/readyz";
}

std::vector<std::string_view> authorizationOf(const Fields& head) {
  std::vector<std::string_view> values;
  for (const auto& field : head) {
    if (field.name() == http::field::authorization) {
      values.emplace_back(field.value().data(), field.value().size());
    }
  }
  return values;
}

Reply unauthorized(TenantDirectory::Check check) {
  const bool missing = check == TenantDirectory::Check::kMissing;
  Reply r = jsonError(401, "authentication_error",
                      missing ? "missing API key: send Authorization: Bearer KEY"
                              : "invalid API key: no tenant has the key given in "
                                "Authorization: Bearer KEY");
  r.wwwAuthenticate = missing ? "Bearer" : "Bearer error=\"invalid_token\"";
  return r;
}

namespace {

// `path`: the request's (requestPath).
Task<bool> routeAny(HttpServer::Shard& shard, TcpStream& stream, Lookahead& client, Request& req,
                    bool keepAlive, ListenerRole role, std::string_view path) {
  Gateway& gw = shard.gw;
  const bool post = req.method() == http::verb::post;
  const bool head = req.method() == http::verb::head;
  const bool get = req.method() == http::verb::get || head;
  auto clientError = [&](int status, std::string_view type, std::string message,
                         std::string_view allow = {}) -> Task<bool> {
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
  if (!serves(path, role)) {
    co_return co_await clientError(404, "invalid_request_error",
                                   "no route for " + std::string(path));
  }
  std::shared_ptr<const Tenant> tenant;
  TenantDirectory& tenants = gw.tenants();
  if (tenants.enabled() && needsKey(path, role)) {
    TenantDirectory::Authentication auth = tenants.authenticate(authorizationOf(req));
    if (auth.check != TenantDirectory::Check::kOk) {
      gw.counters().clientErrors.fetch_add(1, std::memory_order_relaxed);
      co_return co_await writeReply(stream, unauthorized(auth.check), keepAlive, {}, head);
    }
    tenant = std::move(auth.tenant);
    req.erase(http::field::authorization);  // the gateway's key is not the model server's
  }
  const bool inference = isInferencePath(path);
  if (inference) {
    if (!post) co_return co_await methodNotAllowed("POST", "POST");
    co_return co_await handleCompletion(shard, stream, client, req, keepAlive, tenant.get());
  }
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

}  // namespace

// Not a coroutine: the usual request (a POST to an inference path the listener serves, no API key
// to check) is handleCompletion's own coroutine, without a frame of route's around it; anything
// else is routeAny's.
Task<bool> route(HttpServer::Shard& shard, TcpStream& stream, Lookahead& client, Request& req,
                 bool keepAlive, ListenerRole role) {
  const std::string_view path = requestPath(req.target());
  if (req.method() == http::verb::post && isInferencePath(path) && serves(path, role) &&
      !(shard.gw.tenants().enabled() && needsKey(path, role))) {
    return handleCompletion(shard, stream, client, req, keepAlive, nullptr);
  }
  return routeAny(shard, stream, client, req, keepAlive, role, path);
}

}  // namespace holdback::gateway
