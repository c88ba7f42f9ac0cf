#include "http_server.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "client_watch.hpp"
#include "completion.hpp"
#include "own_response.hpp"
#include "proxy_heads.hpp"
#include "routes.hpp"

namespace holdback::gateway {

using namespace std::chrono_literals;

namespace {

// How far the connection's read buffer may grow past --max-header-bytes: room for reads of a
// body, one chunk header (with its extensions) or the trailers of a chunked body.
constexpr std::size_t kReadSlackBytes = std::size_t{64} * 1024;

// The status and message for a request the parser refused.
Reply parseErrorReply(const beast::error_code& ec) {
  if (ec == http::error::header_limit) {
    return jsonError(431, "invalid_request_error", "request header too large");
  }
  if (ec == http::error::body_limit) {
    return jsonError(413, "invalid_request_error", "request body too large");
  }
  if (ec == http::error::buffer_overflow) {
    return jsonError(400, "invalid_request_error",
                     "a chunk header or the trailers of the request are too large (at most " +
                         std::to_string(kReadSlackBytes / 1024) + " KiB)");
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
Task<bool> answerFailedRead(TcpStream& stream, const beast::error_code& ec,
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
Task<void> lingeringClose(TcpStream& stream, std::chrono::milliseconds limit) {
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

// `openCount`: the count of open connections this one is in (the gauge, or the admin
// listener's); `address`: the client's, counted in --max-connections-per-client (empty: not
// counted).
Task<void> session(HttpServer::Shard& shard, TcpSocket socket, ListenerRole role,
                   std::atomic<std::int64_t>& openCount, std::string address) {
  Gateway& gw = shard.gw;
  GatewayCounters& counters = gw.counters();
  struct Open {
    std::atomic<std::int64_t>& n;
    Gateway& gw;
    std::string address;
    ~Open() {
      n.fetch_sub(1, std::memory_order_relaxed);
      if (!address.empty()) gw.clientLimit().leave(address);
    }
  } open{openCount, gw, std::move(address)};
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  socket.non_blocking(true, ignored);  // proxy()'s replies try one immediate send first
  TcpStream stream(std::move(socket));
  const Options& o = gw.options();
  // What is read ahead of the parser is bounded: a request head (--max-header-bytes), then a
  // chunk header or the trailers of a chunked body, each within kReadSlackBytes more. Beast
  // bounds neither chunk extensions nor trailers itself; past the bound the read fails
  // (buffer_overflow: 431 for the head, 400 for a chunk header or trailers). Body bytes move on
  // into the request's body, bounded by --max-body-bytes.
  beast::flat_buffer buffer(o.maxHeaderBytes + kReadSlackBytes);
  const auto client = std::make_shared<Lookahead>(stream.get_executor());
  bool refused = false;  // an error reply to a request that was not read in full
  // The bytes the lookahead read brought (the usual request's head and body, whole) are parsed in
  // its block, where they were read; what the parser leaves there (a partial head or body,
  // pipelined bytes) moves into `buffer` before anything else reads, and the block goes back to
  // the thread's free lists (spill).
  std::string_view fresh;
  const auto spill = [&fresh, &buffer, &client] {
    if (!fresh.empty()) {
      std::memcpy(buffer.prepare(fresh.size()).data(), fresh.data(), fresh.size());
      buffer.commit(fresh.size());
      fresh = {};
    }
    client->releaseBytes();
  };
  for (;;) {
    // Idle: wait for the first bytes of the next request (the lookahead read, started when the
    // previous request had been read, or now), for at most --idle-timeout-s.
    if (buffer.size() == 0) {
      if (!client->pending && !client->complete) startLookahead(client, stream.socket(), counters);
      bool timed_out = false;
      if (client->pending) {
        waitIdle(client, std::chrono::seconds(o.idleTimeoutS));
        while (client->pending) {  // the read's completion, or the idle watchdog, ends the wait
          co_await waitForLookahead(*client);
          if (client->idleExpired && client->pending) {  // the timeout ran out first
            timed_out = true;
            break;
          }
        }
        idleDone(*client);
      }
      if (timed_out) {
        counters.clientTimeouts.fetch_add(1, std::memory_order_relaxed);
        break;  // closing the socket ends the read
      }
      client->complete = false;
      if (client->ec) break;  // the client closed the connection (or it failed)
      fresh = std::string_view(client->bytes.get(), client->n);
    }
    Request req;  // its fields in an arena of its own (http_message.hpp)
    RequestParser parser(req);
    parser.header_limit(std::uint32_t(o.maxHeaderBytes));
    parser.body_limit(o.maxBodyBytes);
    // The usual request's head is whole in the bytes the lookahead read: parsed here, without a
    // read operation (and its deadline) and without suspending. Otherwise, or for the rest of a
    // head, the read under --header-timeout-ms.
    beast::error_code hec;
    bool deadline_set = false;
    if (!fresh.empty()) {
      fresh.remove_prefix(parser.put(asio::buffer(fresh), hec));
    } else if (buffer.size() != 0) {
      buffer.consume(parser.put(buffer.data(), hec));
    }
    if (hec == http::error::need_more) hec = {};
    if (!hec && !parser.is_header_done()) {
      spill();
      stream.expires_after(std::chrono::milliseconds(o.headerTimeoutMs));
      deadline_set = true;
      auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, kUse);
      hec = ec;
    }
    if (hec) {
      refused = co_await answerFailedRead(stream, hec, counters);
      break;
    }
    const Request& head = req;
    // Refused on its head alone, a request is answered before its body is read (and before a
    // 100 Continue invites it), and its connection closes: a POST without a length, a transfer
    // coding the gateway does not read (read as chunked, the body would be something else), and
    // with --api-keys a request without a tenant's key (checked again, and counted, when the
    // request is routed).
    std::optional<Reply> refusal;
    if (head.method() == http::verb::post && !parser.chunked() &&
        !parser.content_length().has_value()) {
      refusal = jsonError(411, "invalid_request_error",
                          "POST needs a Content-Length header (or chunked encoding)");
    } else if (!transferCodingSupported(head)) {
      refusal = jsonError(501, "invalid_request_error",
                          "Transfer-Encoding other than chunked is not supported");
    } else if (!parser.is_done() && gw.tenants().enabled()) {
      if (needsKey(requestPath(head.target()), role)) {
        const auto check = gw.tenants().authenticate(authorizationOf(head), false).check;
        if (check != TenantDirectory::Check::kOk) refusal = unauthorized(check);
      }
    }
    if (refusal) {
      counters.clientErrors.fetch_add(1, std::memory_order_relaxed);
      co_await writeReply(stream, *refusal, false);
      refused = true;
      break;
    }
    // The body's bytes are reserved before it is read (overload.hpp), and held until the reply
    // has been written: its Content-Length, or --max-body-bytes for a chunked body (trimmed once
    // read). A body that does not fit is not read: 503 with Retry-After.
    BufferBudget::Lease body_lease;
    const std::int64_t body_bytes =
        parser.chunked()
            ? static_cast<std::int64_t>(std::min<std::uint64_t>(o.maxBodyBytes, INT64_MAX))
            : static_cast<std::int64_t>(
                  std::min<std::uint64_t>(parser.content_length().value_or(0), INT64_MAX));
    if (!gw.bufferBudget().tryReserve(body_bytes, body_lease)) {
      counters.overloadShed.fetch_add(1, std::memory_order_relaxed);
      Reply r = jsonError(503, "service_unavailable",
                          "the gateway is holding too many request and response bytes "
                          "(--max-buffered-bytes); retry later");
      r.retryAfterS = 1;
      co_await writeReply(stream, r, false);
      refused = true;
      break;
    }
    if (!parser.is_done() && (!fresh.empty() || buffer.size() != 0)) {
      // The body's bytes already read (usually all of it): parsed here, not by a read operation.
      parser.eager(true);
      if (!fresh.empty()) {
        fresh.remove_prefix(parser.put(asio::buffer(fresh), hec));
      } else {
        buffer.consume(parser.put(buffer.data(), hec));
      }
      if (hec == http::error::need_more) hec = {};
      if (hec) {
        refused = co_await answerFailedRead(stream, hec, counters);
        break;
      }
    }
    spill();
    if (!parser.is_done()) {
      deadline_set = true;
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
    if (deadline_set) stream.expires_never();
    body_lease.shrinkTo(static_cast<std::int64_t>(req.body().size()));
    // Absolute form (RFC 9112 section 3.2.2) is routed, and proxied, as its origin form.
    if (const std::string_view origin = originForm(req.target()); origin != req.target()) {
      req.target(origin);  // a copy in the request's arena
    }
    const bool keep_alive = req.keep_alive();
    // Read on while the request is served: the hang-up watch, and the next request's first bytes
    // (with pipelined bytes buffered, the watch is a readiness wait: watchClient).
    if (buffer.size() == 0) {
      if (buffer.capacity() != 0) buffer.shrink_to_fit();  // a waiting connection holds no buffer
      startLookahead(client, stream.socket(), counters);
    }
    counters.exchangesInProgress.fetch_add(1, std::memory_order_relaxed);
    const bool keep = co_await route(shard, stream, *client, req, keep_alive, role);
    counters.exchangesInProgress.fetch_sub(1, std::memory_order_relaxed);
    if (!keep) break;
  }
  client->idleTimer.cancel();  // the idle watchdog's wait holds the Lookahead
  if (refused) {
    co_await lingeringClose(stream, 1s);
    co_return;
  }
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream.close();
}

// Over the connection cap: a 503 with Retry-After, then close (after a short drain of what the
// client sent, so that it reads the reply instead of a reset).
Task<void> shed(TcpSocket socket) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  TcpStream stream(std::move(socket));
  Reply r = jsonError(503, "service_unavailable",
                      "too many open connections to the gateway; retry later");
  r.retryAfterS = 1;
  co_await writeReply(stream, r, false);
  co_await lingeringClose(stream, 1s);
}

// One listener's accept loop: connections go round-robin to the I/O threads; beyond `cap` open
// ones (`open` counts them: the gauge for the public listener, the admin listener's own count)
// a new one is answered 503 and closed.
Task<void> acceptLoop(Gateway& gw, std::vector<std::unique_ptr<HttpServer::Shard>>& shards,
                      tcp::acceptor& acceptor, ListenerRole role, std::int64_t cap,
                      std::atomic<std::int64_t>& open) {
  std::size_t next = 0;
  for (;;) {
    HttpServer::Shard& shard = *shards[next++ % shards.size()];
    auto [ec, socket] = co_await acceptor.async_accept(shard.ctx, kUse);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {  // e.g. out of file descriptors: back off briefly
      IoTimer t(co_await asio::this_coro::executor, 10ms);
      co_await t.async_wait(kUse);
      continue;
    }
    if (open.load(std::memory_order_relaxed) >= cap) {
      if (role != ListenerRole::kAdmin) {  // the metric counts --max-connections sheds
        gw.counters().connectionsShed.fetch_add(1, std::memory_order_relaxed);
      }
      asio::co_spawn(shard.ctx, shed(std::move(socket)), asio::detached);
      continue;
    }
    // Per client address (--max-connections-per-client; the admin listener is not counted).
    std::string address;
    if (role != ListenerRole::kAdmin) {
      beast::error_code rec;
      const tcp::endpoint remote = socket.remote_endpoint(rec);
      if (!rec) address = remote.address().to_string();
      if (!address.empty() && !gw.clientLimit().tryAdmit(address)) {
        gw.counters().clientAddressShed.fetch_add(1, std::memory_order_relaxed);
        asio::co_spawn(shard.ctx, shed(std::move(socket)), asio::detached);
        continue;
      }
    }
    open.fetch_add(1, std::memory_order_relaxed);
    asio::co_spawn(shard.ctx, session(shard, std::move(socket), role, open, std::move(address)),
                   asio::detached);
  }
}

}  // namespace

HttpServer::HttpServer(Gateway& gw, std::vector<asio::io_context*> contexts,
                       const std::vector<tcp::endpoint>& targets)
    : gw_(gw), contexts_(std::move(contexts)) {
  for (asio::io_context* c : contexts_) shards_.push_back(std::make_unique<Shard>(gw, *c, targets));
}

HttpServer::~HttpServer() = default;

namespace {

// A listening socket on `where` (backlog SOMAXCONN); null (printed, naming `flag`) on failure.
std::unique_ptr<tcp::acceptor> openAcceptor(asio::io_context& ctx, const HostPort& where,
                                            const char* flag) {
  beast::error_code ec;
  const auto address =
      asio::ip::make_address(where.host == "localhost" ? "127.0.0.1" : where.host, ec);
  if (ec) {
    std::fprintf(stderr, "holdback-gateway: %s: \"%s\" is not an IP address\n", flag,
                 where.host.c_str());
    return nullptr;
  }
  auto acceptor = std::make_unique<tcp::acceptor>(ctx);
  const tcp::endpoint ep(address, static_cast<unsigned short>(where.port));
  acceptor->open(ep.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(ep, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "holdback-gateway: cannot listen on %s:%d: %s\n", where.host.c_str(),
                 where.port, ec.message().c_str());
    return nullptr;
  }
  return acceptor;
}

}  // namespace

int HttpServer::listen(const HostPort& where) {
  acceptor_ = openAcceptor(*contexts_.front(), where, "--listen");
  return acceptor_ ? acceptor_->local_endpoint().port() : 0;
}

int HttpServer::listenAdmin(const HostPort& where) {
  admin_acceptor_ = openAcceptor(*contexts_.front(), where, "--admin-listen");
  return admin_acceptor_ ? admin_acceptor_->local_endpoint().port() : 0;
}

void HttpServer::startAccepting() {
  const ListenerRole role = admin_acceptor_ ? ListenerRole::kPublic : ListenerRole::kCombined;
  asio::co_spawn(*contexts_.front(),
                 acceptLoop(gw_, shards_, *acceptor_, role, gw_.options().maxConnections,
                            gw_.counters().connectionsOpen),
                 asio::detached);
  if (admin_acceptor_) {
    asio::co_spawn(*contexts_.front(),
                   acceptLoop(gw_, shards_, *admin_acceptor_, ListenerRole::kAdmin,
                              kMaxAdminConnections, admin_open_),
                   asio::detached);
  }
}

void HttpServer::releaseIoObjects() {
  acceptor_.reset();
  admin_acceptor_.reset();
  for (auto& s : shards_) s->upstream.clear();
}

void HttpServer::stopAccepting() {
  asio::post(*contexts_.front(), [this] {
    beast::error_code ec;
    acceptor_->close(ec);
    if (admin_acceptor_) admin_acceptor_->close(ec);
  });
}

}  // namespace holdback::gateway
