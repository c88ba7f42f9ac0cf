#include "http_client.hpp"

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <limits>

namespace holdback_e2e {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (beast::iequals(n, name)) return v;
  }
  return {};
}

bool HttpResponse::hasHeader(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (beast::iequals(n, name)) return true;
  }
  return false;
}

struct HttpClient::Impl {
  Impl(std::string h, int p, HttpClientOptions o) : host(std::move(h)), port(p), options(o) {}

  // Runs one asynchronous operation to its end (its timeout is the stream's expiry).
  template <typename Start>
  beast::error_code run(Start start) {
    beast::error_code result;
    start([&result](const beast::error_code& ec, std::size_t = 0) { result = ec; });
    ctx.restart();
    ctx.run();
    return result;
  }

  // False when the kept connection has been closed by the server (or reset).
  bool stillOpen() {
    if (!stream || !stream->socket().is_open()) return false;
    char b = 0;
    const ssize_t n = ::recv(stream->socket().native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }

  beast::error_code connect() {
    stream = std::make_unique<beast::tcp_stream>(ctx);
    buffer.clear();
    beast::error_code ec;
    tcp::resolver resolver(ctx);
    const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
    if (ec) return ec;
    stream->expires_after(options.connectTimeout);
    ec = run([&](auto handler) {
      stream->async_connect(
          endpoints, [handler](const beast::error_code& e, const tcp::endpoint&) { handler(e); });
    });
    if (!ec) stream->socket().set_option(tcp::no_delay(true), ec);
    return ec;
  }

  void close() {
    if (!stream) return;
    beast::error_code ignored;
    stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream->close();
    stream.reset();
  }

  HttpResult fail(const std::string& what, const beast::error_code& ec) {
    close();
    return HttpResult::failure(what + ": " + ec.message());
  }

  HttpResult send(std::string_view method, std::string_view path, const HttpHeaders& headers,
                  std::string body, std::string_view contentType, const BodySink& onBody) {
    if (!stillOpen()) {
      close();
      if (auto ec = connect()) return fail("connect", ec);
    }
    http::request<http::string_body> req{http::string_to_verb(method), path, 11};
    req.set(http::field::host, host + ":" + std::to_string(port));
    req.set(http::field::accept, "*/*");
    for (const auto& [name, value] : headers) req.insert(name, value);
    if (!contentType.empty()) req.set(http::field::content_type, contentType);
    req.body() = std::move(body);
    if (req.method() == http::verb::post || !req.body().empty()) req.prepare_payload();
    stream->expires_after(options.writeTimeout);
    if (auto ec = run([&](auto handler) { http::async_write(*stream, req, handler); })) {
      return fail("write", ec);
    }

    // The final response's head, after any interim (1xx but 101) ones.
    HttpResponse res;
    std::optional<http::response_parser<http::string_body>> head;
    for (;;) {
      head.emplace();
      head->header_limit(1024 * 1024);
      head->body_limit(std::numeric_limits<std::uint64_t>::max());
      stream->expires_after(options.readTimeout);
      if (auto ec = run(
              [&](auto handler) { http::async_read_header(*stream, buffer, *head, handler); })) {
        return fail("read", ec);
      }
      const int code = static_cast<int>(head->get().result_int());
      if (code < 100 || code >= 200 || code == 101) break;
      res.interim.push_back(code);
    }
    http::response_parser<http::string_body>& parser = *head;
    res.headAt = Clock::now();
    std::size_t delivered = 0;
    const auto deliver = [&]() -> bool {
      const std::string& got = parser.get().body();
      if (got.size() == delivered) return true;
      if (delivered == 0) res.firstBodyAt = Clock::now();
      const std::string_view piece(got.data() + delivered, got.size() - delivered);
      delivered = got.size();
      return !onBody || onBody(piece);
    };
    while (!parser.is_done()) {
      stream->expires_after(options.readTimeout);
      const auto ec =
          run([&](auto handler) { http::async_read_some(*stream, buffer, parser, handler); });
      if (!deliver()) {
        close();
        return HttpResult::failure("cancelled by the body receiver");
      }
      if (ec) return fail("read", ec);
    }
    if (!deliver()) {
      close();
      return HttpResult::failure("cancelled by the body receiver");
    }
    stream->expires_never();
    auto msg = parser.release();
    res.status = static_cast<int>(msg.result_int());
    for (const auto& field : msg) {
      res.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    res.body = std::move(msg.body());
    if (!msg.keep_alive()) close();
    return HttpResult(std::move(res));
  }

  std::string host;
  int port;
  HttpClientOptions options;
  asio::io_context ctx{1};
  std::unique_ptr<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
};

HttpClient::HttpClient(std::string host, int port, HttpClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(host), port, options)) {}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

HttpResult HttpClient::get(std::string_view path, const HttpHeaders& headers) {
  return impl_->send("GET", path, headers, {}, {}, {});
}

HttpResult HttpClient::post(std::string_view path, std::string body, std::string_view contentType,
                            const HttpHeaders& headers) {
  return impl_->send("POST", path, headers, std::move(body), contentType, {});
}

HttpResult HttpClient::send(std::string_view method, std::string_view path,
                            const HttpHeaders& headers, std::string body,
                            std::string_view contentType, const BodySink& onBody) {
  return impl_->send(method, path, headers, std::move(body), contentType, onBody);
}

void HttpClient::close() {
  impl_->close();
}

}  // namespace holdback_e2e
