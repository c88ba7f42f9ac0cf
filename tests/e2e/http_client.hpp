// A small synchronous HTTP/1.1 client for the end-to-end tests, on Boost.Beast: GET and POST with
// headers, connect / read / write timeouts, keep-alive reuse of one connection, and a streaming
// read of the body (each piece as it arrives, e.g. server-sent events).
//
// One connection per client, opened on the first request and kept alive while the server keeps
// it: a request on a connection the server has closed in the meantime opens a new one first. The
// read timeout bounds each wait for bytes (the head, or the next piece of the body), not the
// whole response, so a long stream that keeps sending never times out.
//
// Thread safety: thread-compatible (one client per thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace holdback_e2e {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;  // in arrival order
  std::string body;
  // When the head arrived, and when the first body bytes arrived (for a stream: the first event).
  std::chrono::steady_clock::time_point headAt{};
  std::chrono::steady_clock::time_point firstBodyAt{};
  // The interim (1xx) responses' status codes that came before this final one (RFC 9110
  // section 15.2: a client skips them).
  std::vector<int> interim;

  // The first value of field `name` (case-insensitive), or "" when absent.
  [[nodiscard]] std::string header(std::string_view name) const;
  [[nodiscard]] bool hasHeader(std::string_view name) const;
};

// A response, or why there is none (connect failure, timeout, connection closed, cancelled).
class HttpResult {
 public:
  explicit HttpResult(HttpResponse r) : response_(std::move(r)) {}
  static HttpResult failure(std::string error) {
    HttpResult r;
    r.error_ = std::move(error);
    return r;
  }
  explicit operator bool() const { return response_.has_value(); }
  const HttpResponse* operator->() const { return &*response_; }
  const HttpResponse& operator*() const { return *response_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  HttpResult() = default;
  std::optional<HttpResponse> response_;
  std::string error_;
};

struct HttpClientOptions {
  std::chrono::milliseconds connectTimeout{5000};
  std::chrono::milliseconds readTimeout{30000};
  std::chrono::milliseconds writeTimeout{5000};
};

class HttpClient {
 public:
  // Each piece of the body as it arrives; returning false hangs up (the result is a failure,
  // "cancelled").
  using BodySink = std::function<bool(std::string_view)>;

  HttpClient(std::string host, int port, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  HttpResult get(std::string_view path, const HttpHeaders& headers = {});
  HttpResult post(std::string_view path, std::string body, std::string_view contentType,
                  const HttpHeaders& headers = {});
  HttpResult send(std::string_view method, std::string_view path, const HttpHeaders& headers,
                  std::string body, std::string_view contentType, const BodySink& onBody = {});

  // Closes the connection (the next request opens a new one).
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace holdback_e2e
