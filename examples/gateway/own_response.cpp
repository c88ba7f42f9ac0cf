#include "own_response.hpp"

#include <utility>

namespace holdback::gateway {

using namespace std::chrono_literals;

namespace {

// A reply to HEAD has the headers the GET reply would have, its Content-Length included, and no
// body (RFC 9110 section 9.3.2): a body there would be read as the start of the next response on
// a kept-alive connection.
void omitBodyForHead(http::response<http::string_body>& res, bool head) {
  if (!head) return;
  const std::size_t n = res.body().size();
  res.body().clear();
  res.content_length(n);
}

}  // namespace

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

Task<bool> send(TcpStream& s, http::response<http::string_body>& res, bool head) {
  res.prepare_payload();
  omitBodyForHead(res, head);
  s.expires_after(30s);
  auto [ec, n] = co_await http::async_write(s, res, kUse);
  s.expires_never();
  co_return !ec && res.keep_alive();
}

Task<bool> writeReply(TcpStream& s, const Reply& r, bool keepAlive, std::string_view allow,
                      bool head) {
  auto res = ownResponse(unsigned(r.status), "application/json", keepAlive, r.body);
  if (!r.dropReason.empty()) res.set(kDropReasonHeader, r.dropReason);
  if (r.retryAfterS > 0) res.set(http::field::retry_after, std::to_string(r.retryAfterS));
  if (!allow.empty()) res.set(http::field::allow, allow);
  if (!r.wwwAuthenticate.empty()) res.set(http::field::www_authenticate, r.wwwAuthenticate);
  co_return co_await send(s, res, head);
}

Task<bool> writeText(TcpStream& s, unsigned status, std::string body, std::string_view contentType,
                     bool keepAlive, bool head) {
  auto res = ownResponse(status, contentType, keepAlive, std::move(body));
  co_return co_await send(s, res, head);
}

}  // namespace holdback::gateway
