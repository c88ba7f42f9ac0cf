#include "upstream.hpp"

#include <nlohmann/json.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "draining_read.hpp"
#include "gateway_http.hpp"
#include "proxy_heads.hpp"

namespace holdback::gateway {
namespace {

// Tries to write all of `buffers` to `s` with one non-blocking send, which on a socket in
// non-blocking mode (UpstreamPool and the client sessions set it) almost always takes the whole
// message. Returns the bytes sent; `ec` is set only on a real failure (not on would-block).
// Called directly, not as a coroutine: the usual request neither suspends nor allocates a
// coroutine frame nor arms and cancels the stream's timer for it.
template <class Buffers>
std::size_t sendNow(TcpStream& s, const Buffers& buffers, beast::error_code& ec) {
  if (!s.socket().non_blocking()) return 0;
  const std::size_t sent = s.socket().write_some(buffers, ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
  return ec ? 0 : sent;
}

// What sendNow did not take, written asynchronously under `timeout`.
template <class Buffers>
Task<beast::error_code> writeRest(TcpStream& s, const Buffers& buffers, std::size_t sent,
                                  std::chrono::seconds timeout) {
  beast::buffers_suffix<Buffers> rest(buffers);
  rest.consume(sent);
  s.expires_after(timeout);
  auto [wec, wn] = co_await asio::async_write(s, rest, kUse);
  s.expires_never();  // reads from an upstream connection are timed by its watchdog instead
  co_return wec;
}

// An idle kept-alive connection is usable when the server has neither closed it nor sent
// anything unasked.
bool stillOpen(UpstreamConnection& c) {
  char b = 0;
  const ssize_t n = ::recv(c.stream.socket().native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// Parses what `c`'s buffer holds: the head, or with parser.eager() the rest of the message.
// True when the parser needs more bytes; false when it has what it was asked for, or failed
// (`ec`). Beast's read operations do the same around each read (with a post of the completion
// when no read was needed, which this saves).
bool parseBuffered(UpstreamConnection& c, ResponseParser& parser, beast::error_code& ec) {
  ec = {};
  const auto satisfied = [&parser] {
    return parser.eager() ? parser.is_done() : parser.is_header_done();
  };
  while (c.buffer.size() != 0 && !satisfied()) {
    const std::size_t used = parser.put(c.buffer.data(), ec);
    c.buffer.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      return true;
    }
    if (ec) return false;
    if (used == 0) break;
  }
  return !satisfied();
}

// Room for the next read into `c`'s buffer, as Beast's reads size it (at most 64 KiB at a time);
// buffer_overflow when the buffer is at its bound (kReadBufferBytes: an endless head, chunk
// header or trailer).
DrainingBuffer readRoom(UpstreamConnection& c, beast::error_code& ec) {
  const std::size_t size = c.buffer.size();
  const std::size_t limit = c.buffer.max_size() - size;
  if (limit == 0) {
    ec = http::error::buffer_overflow;
    return {};
  }
  const std::size_t n = std::min(std::max<std::size_t>(512, c.buffer.capacity() - size),
                                 std::min<std::size_t>(65536, limit));
  return DrainingBuffer(c.buffer.prepare(n));
}

// After a read of `n` bytes into readRoom(): commits them; at the end of the stream, ends a
// message delimited by the close (`ec` cleared) or fails (partial_message, end_of_stream).
void commitRead(UpstreamConnection& c, ResponseParser& parser, beast::error_code& ec,
                std::size_t n) {
  c.buffer.commit(n);
  if (ec != asio::error::eof) return;
  if (!parser.got_some()) {
    ec = http::error::end_of_stream;
    return;
  }
  ec = {};
  parser.put_eof(ec);
}

}  // namespace

namespace {
void armWatchdog(UpstreamConnection& c) {
  c.watchdogArmed = true;
  c.watchdog.expires_at(c.readSince + c.readTimeout);
  c.watchdog.async_wait([watch = c.watch](const beast::error_code& ec) {
    UpstreamConnection* conn = watch->conn;
    if (conn == nullptr) return;  // the connection is gone (its timer's destruction: ec set)
    conn->watchdogArmed = false;
    if (ec || !conn->reading) return;  // re-armed by the next read
    if (std::chrono::steady_clock::now() - conn->readSince >= conn->readTimeout) {
      conn->timedOut = true;
      beast::error_code ignored;
      conn->stream.socket().close(ignored);  // the read fails; readDone() says timeout
      return;
    }
    armWatchdog(*conn);  // the read in progress started after the armed one: its own deadline
  });
}
}  // namespace

void UpstreamConnection::awaitRead(std::chrono::steady_clock::duration timeout) {
  readSince = std::chrono::steady_clock::now();
  readTimeout = timeout;
  reading = true;
  if (!watchdogArmed) armWatchdog(*this);
}

UpstreamPool::UpstreamPool(IoExecutor ex, std::vector<tcp::endpoint> targets,
                           const Options& options, GatewayCounters& counters)
    : ex_(std::move(ex)),
      targets_(std::move(targets)),
      options_(options),
      counters_(counters),
      idle_(targets_.size()) {
  for (const tcp::endpoint& t : targets_) {
    host_headers_.push_back(t.address().to_string() + ":" + std::to_string(t.port()));
    demand_.push_back(std::make_shared<UpstreamDemand>());
  }
}

namespace {
struct ConnectionLimitCategory : boost::system::error_category {
  [[nodiscard]] const char* name() const noexcept override { return "holdback.upstream"; }
  [[nodiscard]] std::string message(int /*ev*/) const override {
    return "upstream connection limit reached (--upstream-max-connections)";
  }
};
const ConnectionLimitCategory kConnectionLimitCategory;
}  // namespace

const beast::error_code UpstreamPool::kConnectionLimit{1, kConnectionLimitCategory};

std::size_t UpstreamPool::idleCap(std::size_t i) const {
  const UpstreamDemand& d = *demand_[i];
  return std::max({std::size_t(options_.upstreamMaxIdle), d.peak, d.previousPeak});
}

// Counts `c` as in use, and the endpoint's peak of connections in use at once for this period.
void UpstreamPool::checkOut(std::size_t i, UpstreamConnection& c) {
  UpstreamDemand& d = *demand_[i];
  c.inUse = true;
  ++d.inUse;
  const auto now = std::chrono::steady_clock::now();
  if (now - d.periodStart >= std::chrono::milliseconds(options_.upstreamIdleMs)) {
    // A new period: what the last one needed is kept for one more (a gap of two whole periods
    // without demand lets the cap fall back to --upstream-max-idle).
    d.previousPeak =
        now - d.periodStart < 2 * std::chrono::milliseconds(options_.upstreamIdleMs) ? d.peak : 0;
    d.peak = 0;
    d.periodStart = now;
  }
  d.peak = std::max(d.peak, d.inUse);
}

std::unique_ptr<UpstreamConnection> UpstreamPool::takeIdle(std::size_t i) {
  const auto now = std::chrono::steady_clock::now();
  const auto max_idle = std::chrono::milliseconds(options_.upstreamIdleMs);
  auto& idle = idle_[i];
  while (!idle.empty()) {
    std::unique_ptr<UpstreamConnection> c = std::move(idle.back());
    idle.pop_back();
    const auto idle_for = now - c->idleSince;
    // Every reuse is checked first (one non-blocking MSG_PEEK): a request is not retried once
    // the server may have read it (see proxy()), so a connection the server has closed must not
    // be taken.
    if (idle_for < max_idle && stillOpen(*c)) {
      counters_.upstreamReuses.fetch_add(1, std::memory_order_relaxed);
      checkOut(i, *c);
      return c;
    }
  }
  return nullptr;
}

Task<std::unique_ptr<UpstreamConnection>> UpstreamPool::connect(std::size_t i,
                                                                beast::error_code& ec) {
  if (demand_[i]->open >= std::size_t(options_.upstreamMaxConnections)) {
    ec = kConnectionLimit;
    co_return nullptr;
  }
  auto c = std::make_unique<UpstreamConnection>(ex_, demand_[i]);
  checkOut(i, *c);
  c->stream.expires_after(std::chrono::milliseconds(options_.upstreamConnectMs));
  auto [cec] = co_await c->stream.async_connect(targets_[i], kUse);
  c->stream.expires_never();
  if (cec) {
    ec = cec;
    co_return nullptr;
  }
  c->stream.socket().set_option(tcp::no_delay(true), ec);
  c->stream.socket().non_blocking(true, ec);  // for sendNow's immediate send
  ec = {};
  counters_.upstreamConnects.fetch_add(1, std::memory_order_relaxed);
  co_return c;
}

void UpstreamPool::release(std::size_t i, std::unique_ptr<UpstreamConnection> c) {
  auto& idle = idle_[i];
  if (c->inUse) {
    c->inUse = false;
    --demand_[i]->inUse;
  }
  if (idle.size() >= idleCap(i)) return;  // closed by the destructor
  c->idleSince = std::chrono::steady_clock::now();
  // The stream has no deadline here: connect() and writeRest() clear the ones they set.
  idle.push_back(std::move(c));
}

// GCC 12 reports a false -Wmismatched-new-delete for this coroutine's frame after inlining asio's
// awaitable_frame_base operator new/delete (GCC PR middle-end/109224).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
Task<ProxyResult> proxy(UpstreamPool& pool, const Options& options, Request& request,
                        TcpStream& client, const ProxyRequest& what, AbortHandle& abort,
                        std::string& error, unsigned& status) {
  const auto timeout = std::chrono::seconds(options.upstreamTimeoutS);

  const std::string head = upstreamRequestHead(request, pool.hostHeader(what.endpoint));
  const std::array<asio::const_buffer, 2> up{asio::buffer(head), asio::buffer(request.body())};

  // Why the exchange was aborted: the client's hang-up, or a revocation (before or after the
  // streamed head went out).
  const auto aborted = [&abort](bool headSent) {
    if (!abort.revoked) return ProxyResult::kClientGone;
    return headSent ? ProxyResult::kRevokedMidStream : ProxyResult::kRevoked;
  };
  for (int attempt = 0;; ++attempt) {
    beast::error_code ec;
    // The retry (attempt 1) takes a new connection: the pool's other idle ones may be as dead.
    std::unique_ptr<UpstreamConnection> conn =
        attempt == 0 ? pool.takeIdle(what.endpoint) : nullptr;
    const bool reused = conn != nullptr;
    if (!conn) conn = co_await pool.connect(what.endpoint, ec);
    if (abort.aborted) co_return aborted(false);
    if (!conn) {
      error = "connect: " + ec.message();
      if (ec == UpstreamPool::kConnectionLimit) status = 503;  // not the server's failure
      co_return ProxyResult::kFailedBeforeHead;
    }
    abort.active = conn.get();
    struct Clear {
      AbortHandle& a;
      ~Clear() { a.active = nullptr; }
    } clear{abort};

    beast::error_code wec;
    const std::size_t sent_now = sendNow(conn->stream, up, wec);
    if (!wec && sent_now < beast::buffer_bytes(up)) {
      wec = co_await writeRest(conn->stream, up, sent_now, timeout);
    }
    if (abort.aborted) co_return aborted(false);
    if (wec) {
      if (reused && attempt == 0) continue;  // the server closed the idle connection: once more
      error = "send: " + wec.message();
      co_return ProxyResult::kFailedBeforeHead;
    }
    // The response head, after any interim (1xx) responses (RFC 9110 section 15.2): 100
    // Continue is dropped (the gateway answers a client's Expect itself and sends none
    // upstream), other 1xx (102, 103 Early Hints) are passed to an HTTP/1.1 client (never to an
    // HTTP/1.0 one), at most kMaxInterimResponses of them; 101 (a protocol switch the gateway
    // never asks for) fails the exchange and the connection is closed.
    // The reads go to the socket (their deadline is the connection's watchdog) through
    // DrainingBuffers: a read after one that drained the socket waits for the next event
    // without first trying a recv that finds nothing (draining_read.hpp). What the buffer
    // already holds is parsed without a read.
    std::optional<ResponseHead> head;
    std::optional<ResponseParser> parser;
    beast::error_code hec;
    bool got_data = false;  // a response byte arrived: the exchange is not retried
    for (int interim = 0;; ++interim) {
      head.emplace();
      parser.emplace(*head);
      parser->body_limit((std::numeric_limits<std::uint64_t>::max)());
      while (parseBuffered(*conn, *parser, hec)) {
        const DrainingBuffer room = readRoom(*conn, hec);
        if (hec) break;
        conn->awaitRead(timeout);
        auto [rec, rn] = co_await conn->stream.socket().async_read_some(room, kUse);
        conn->readDone(rec);
        commitRead(*conn, *parser, rec, rn);
        if (abort.aborted) co_return aborted(false);
        if (rec) {
          hec = rec;
          break;
        }
      }
      if (hec || abort.aborted) break;
      got_data = true;
      const unsigned code = head->result_int();
      if (code >= 200) break;
      if (code == 101 || code < 100) {
        hec = http::error::bad_status;
        break;
      }
      if (interim >= kMaxInterimResponses) {
        hec = http::error::bad_status;
        break;
      }
      if (code == 100 || !what.chunked) continue;
      const std::string hint = interimResponseHead(*head);
      client.expires_after(timeout);
      auto [iec, in] = co_await asio::async_write(client, asio::buffer(hint), kUse);
      client.expires_never();
      if (iec) {
        abort.abort();
        co_return ProxyResult::kClientGone;
      }
    }
    if (abort.aborted) co_return aborted(false);
    if (hec) {
      // Retried only when the server provably did not read the request: it reset the connection
      // (RST: a socket closed with our bytes unread) before any response byte. A clean close
      // (EOF) after the whole request was sent may follow a request the server took: 502, never
      // sent twice.
      if (reused && attempt == 0 && !got_data && conn->buffer.size() == 0 &&
          (hec == asio::error::connection_reset || hec == asio::error::broken_pipe)) {
        continue;
      }
      error = "response head: " + hec.message();
      co_return ProxyResult::kFailedBeforeHead;
    }
    status = head->result_int();
    std::string_view content_type = (*head)[http::field::content_type];
    if (content_type.empty()) content_type = "application/json";

    // The body: a whole one collected (at most --max-response-bytes), a stream's pieces passed
    // on as each read brings them.
    std::string collected;
    parser->bodyTo(&collected, what.stream ? std::numeric_limits<std::size_t>::max()
                                           : options.maxResponseBytes);
    parser->eager(true);
    BufferBudget::Lease collected_lease =
        what.budget != nullptr ? what.budget->open() : BufferBudget::Lease();
    std::size_t leased = 0;  // of collected
    bool head_sent = false;
    bool first_body_seen = false;
    // A stream's served tokens (program-aware-fairness): reported however the stream ends, since
    // what was generated was served.
    StreamUsageScanner scanner;
    struct ReportStreamUsage {
      const ProxyRequest& what;
      const StreamUsageScanner& scanner;
      std::uint64_t bodyBytes;
      ~ReportStreamUsage() {
        if (what.usage == nullptr || !scanner.known()) return;
        what.usage->known = true;
        what.usage->promptTokens = scanner.promptTokens(bodyBytes);
        what.usage->completionTokens = scanner.completionTokens();
      }
    } report_stream_usage{what, scanner, request.body().size()};
    if (what.stream) {
      std::string out;
      out.reserve(512);
      appendResponseHead(out, *head, content_type, what, std::nullopt);
      client.expires_after(timeout);
      auto [cec, cn] = co_await asio::async_write(client, asio::buffer(out), kUse);
      if (cec) {
        abort.abort();
        co_return ProxyResult::kClientGone;
      }
      head_sent = true;
    }
    for (;;) {
      beast::error_code rec;
      const bool more = parseBuffered(*conn, *parser, rec);
      if (rec == http::error::body_limit) {
        pool.countResponseTooLarge();
        error = "response body larger than --max-response-bytes (" +
                std::to_string(options.maxResponseBytes) + ")";
        co_return ProxyResult::kFailedBeforeHead;
      }
      if (!collected.empty()) {
        if (!first_body_seen) {
          first_body_seen = true;
          if (what.onFirstBody) what.onFirstBody();
        }
        if (what.stream) {
          if (what.usage != nullptr) scanner.feed(collected);
          client.expires_after(timeout);
          const asio::const_buffer piece(collected.data(), collected.size());
          auto [cec, cn] = what.chunked
                               ? co_await asio::async_write(client, http::make_chunk(piece), kUse)
                               : co_await asio::async_write(client, piece, kUse);
          if (cec) {
            abort.abort();
            co_return ProxyResult::kClientGone;
          }
          collected.clear();
        } else {
          collected_lease.grow(static_cast<std::int64_t>(collected.size() - leased));
          leased = collected.size();
        }
      }
      if (!rec && more) {
        const DrainingBuffer room = readRoom(*conn, rec);
        if (!rec) {
          conn->awaitRead(timeout);
          auto [ec_read, rn] = co_await conn->stream.socket().async_read_some(room, kUse);
          rec = ec_read;
          conn->readDone(rec);
          commitRead(*conn, *parser, rec, rn);
          if (abort.aborted) co_return aborted(head_sent);
          if (!rec) continue;
        }
      }
      if (rec) {
        error = "response body: " + rec.message();
        co_return head_sent ? ProxyResult::kTruncated : ProxyResult::kFailedBeforeHead;
      }
      break;
    }
    // Back to the pool only after a complete response whose framing allows another on the same
    // connection (not one delimited by the close: parser.keep_alive() is false then) and with
    // nothing read past its end: bytes beyond it would be read as the next client's response.
    const bool upstream_keep = parser->keep_alive() && conn->buffer.size() == 0;
    if (parser->keep_alive() && conn->buffer.size() != 0) {
      pool.countDiscarded();
    }
    abort.active = nullptr;
    if (upstream_keep) pool.release(what.endpoint, std::move(conn));

    if (what.stream) {
      if (!what.chunked) co_return ProxyResult::kDone;  // the close ends the body
      client.expires_after(timeout);
      auto [cec, cn] = co_await asio::async_write(client, http::make_chunk_last(), kUse);
      client.expires_never();
      co_return cec ? ProxyResult::kClientGone : ProxyResult::kDone;
    }
    if (what.usage != nullptr) {
      if (const auto usage = scanResponseUsage(collected)) {
        what.usage->known = true;
        what.usage->promptTokens = usage->promptTokens;
        what.usage->completionTokens = usage->completionTokens;
      }
    }
    std::string out;
    out.reserve(512);
    appendResponseHead(out, *head, content_type, what, collected.size());
    const std::array<asio::const_buffer, 2> reply{asio::buffer(out), asio::buffer(collected)};
    beast::error_code cec;
    const std::size_t reply_sent = sendNow(client, reply, cec);
    if (!cec && reply_sent < beast::buffer_bytes(reply)) {
      cec = co_await writeRest(client, reply, reply_sent, timeout);  // resets the deadline
    }
    co_return cec ? ProxyResult::kClientGone : ProxyResult::kDone;
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace holdback::gateway
