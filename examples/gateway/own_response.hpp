// The responses the gateway writes itself (errors, /metrics, /healthz...): complete bodies
// framed with Content-Length, written under a 30 s timeout.
//
// Thread safety: thread-compatible (called on the connection's I/O thread).
#pragma once

#include <string>
#include <string_view>

#include "gateway_http.hpp"
#include "net.hpp"

namespace holdback::gateway {

inline Reply jsonError(int status, std::string_view type, std::string_view message) {
  return replyForError(status, type, message);
}

// A response the gateway writes itself, its body complete.
http::response<http::string_body> ownResponse(unsigned status, std::string_view contentType,
                                              bool keepAlive, std::string body);

// Frames `res` (Content-Length), drops its body for HEAD and writes it under a 30 s timeout; true
// when it was written and the connection stays open.
Task<bool> send(TcpStream& s, http::response<http::string_body>& res, bool head = false);

// An OpenAI-style error reply (JSON body, drop-reason, Retry-After and Allow headers when set).
Task<bool> writeReply(TcpStream& s, const Reply& r, bool keepAlive, std::string_view allow = {},
                      bool head = false);

// A 200-style text reply of `contentType`.
Task<bool> writeText(TcpStream& s, unsigned status, std::string body, std::string_view contentType,
                     bool keepAlive, bool head = false);

}  // namespace holdback::gateway
