// Upstream side: pooled keep-alive connections to the model servers, and the proxy exchange that
// relays one request over them.
//
// UpstreamPool (one per I/O thread, so it needs no lock): per model server, a stack of idle
// kept-alive connections (one idle longer than --upstream-idle-ms, or that the server closed or
// sent anything on while idle, is dropped instead of reused: a non-blocking MSG_PEEK per reuse).
// takeIdle() pops a live idle connection, connect() makes a new one
// (--upstream-connect-ms, TCP_NODELAY); release() returns a connection whose response was read to
// the end with keep-alive.
// The pool grows with demand: release() keeps a connection while the idle stack is smaller than
// max(--upstream-max-idle, the most connections in use at once to that server over the last two
// --upstream-idle-ms periods), so that a concurrency above --upstream-max-idle does not close and
// reopen connections on every burst of completions (each reconnect is a handshake and a trip
// through the server's listen backlog). Open connections (in use and idle) to one server are
// capped at --upstream-max-connections per I/O thread: over it, connect() fails with
// kConnectionLimit and the request is answered 503 with Retry-After (no connect is attempted).
//
// A connection goes back to the pool only after a complete response framed by Content-Length or
// chunked coding, with keep-alive, and with nothing received past its end; interim (1xx)
// responses before the final one are read and dropped (100) or passed on (102, 103: to HTTP/1.1
// clients only), 101 fails the exchange.
// proxy(): sends the request (its head serialized by hand into one buffer, written with the body
// in one gather write that is first tried as one non-blocking send), reads the response head and
// relays the body: streamed (`"stream": true`) as chunked transfer encoding, chunk by chunk as it
// arrives; otherwise collected and sent with a Content-Length, head and body again in one write
// (an upstream failure mid-body is still a 502). The response is parsed by ResponseParser
// (http_message.hpp) straight from the connection's buffer, and the socket is read only when the
// buffer holds too little, through DrainingBuffer (draining_read.hpp: no read that finds nothing
// after one that drained the socket). A request is
// sent twice only when the server provably did not read it: on a reused connection, the send
// failed, or the server reset the connection (a socket closed with the request unread) before any
// response byte; it is then retried once on a new connection. A clean close after the whole request
// went out is a 502. Cancellation: the caller's hang-up watch closes the upstream connection at
// once when the client goes away; proxy() then returns kClientGone and the connection is not
// reused, so the model server sees the disconnect and frees the slot. A revocation (in-flight
// eviction) aborts the same way with AbortHandle::revoked set; proxy() then returns kRevoked or
// kRevokedMidStream, and the caller answers the client.
//
// Thread safety: not thread-safe; everything runs on the owning I/O thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway.hpp"
#include "http_message.hpp"
#include "net.hpp"

namespace holdback::gateway {

// Per endpoint and I/O thread: connections open and in use now, and the most in use at once in
// the current and the previous --upstream-idle-ms period (the demand release() keeps idle
// connections for). Shared with the connections, which count themselves out when destroyed
// (wherever that happens: a failed exchange, an aborted one, a coroutine frame torn down at
// shutdown).
struct UpstreamDemand {
  std::size_t open = 0;
  std::size_t inUse = 0;
  std::size_t peak = 0;
  std::size_t previousPeak = 0;
  std::chrono::steady_clock::time_point periodStart{};
};

struct UpstreamConnection {
  UpstreamConnection(const IoExecutor& ex, std::shared_ptr<UpstreamDemand> d)
      : stream(ex),
        buffer(kReadBufferBytes),
        demand(std::move(d)),
        watchdog(ex),
        watch(std::make_shared<Watch>(Watch{this})) {
    ++demand->open;
  }
  ~UpstreamConnection() {
    watch->conn = nullptr;  // a watchdog expiry already queued finds the connection gone
    --demand->open;
    if (inUse) --demand->inUse;
  }
  UpstreamConnection(const UpstreamConnection&) = delete;
  UpstreamConnection& operator=(const UpstreamConnection&) = delete;
  // What is read ahead of the parser: a response head (at most the parser's 8 KiB header limit),
  // a chunk header, the trailers. Bounded, so that a server sending an endless chunk extension
  // or trailer fails its exchange instead of growing the gateway's memory.
  static constexpr std::size_t kReadBufferBytes = std::size_t{64} * 1024;
  TcpStream stream;
  beast::flat_buffer buffer;
  std::chrono::steady_clock::time_point idleSince{};
  std::shared_ptr<UpstreamDemand> demand;
  bool inUse = false;  // out of the pool, carrying an exchange

  // The upstream timeout (--upstream-timeout-s: per read from the server) without a timer
  // armed and cancelled around every read: awaitRead() marks the start of a read, and one
  // watchdog wait per connection, re-armed only when it expires, closes the socket once a read
  // has waited the whole timeout (the read then fails with error::timeout, as a
  // TcpStream deadline would). Between exchanges (`reading` false) an expiry does nothing.
  struct Watch {
    UpstreamConnection* conn;
  };
  IoTimer watchdog;
  std::shared_ptr<Watch> watch;
  std::chrono::steady_clock::time_point readSince{};
  std::chrono::steady_clock::duration readTimeout{};
  bool watchdogArmed = false;
  bool reading = false;   // a read from the server is in progress
  bool timedOut = false;  // the watchdog closed the socket

  // Call before each read from the server; `timeout` bounds the read.
  void awaitRead(std::chrono::steady_clock::duration timeout);
  // Call after each read; maps the failure of a read the watchdog ended to error::timeout.
  void readDone(beast::error_code& ec) {
    reading = false;
    if (ec && timedOut) ec = beast::error::timeout;
  }
};

class UpstreamPool {
 public:
  UpstreamPool(IoExecutor ex, std::vector<tcp::endpoint> targets, const Options& options,
               GatewayCounters& counters);

  // A usable idle connection to endpoint i, or nullptr (then connect()). Not a coroutine: the
  // usual request under load takes a pooled connection without suspending.
  std::unique_ptr<UpstreamConnection> takeIdle(std::size_t i);
  // A new connection to endpoint i (nullptr and `ec` on a failed connect; `ec` is
  // kConnectionLimit when --upstream-max-connections are open to it already).
  Task<std::unique_ptr<UpstreamConnection>> connect(std::size_t i, beast::error_code& ec);
  static const beast::error_code kConnectionLimit;
  void release(std::size_t i, std::unique_ptr<UpstreamConnection> c);
  // A connection closed instead of reused because the server sent bytes past its response.
  void countDiscarded() { counters_.upstreamDesynced.fetch_add(1, std::memory_order_relaxed); }
  void countResponseTooLarge() {
    counters_.responsesTooLarge.fetch_add(1, std::memory_order_relaxed);
  }
  // Connections to endpoint i open now (in use and idle), and how many idle ones release() keeps.
  [[nodiscard]] std::size_t openConnections(std::size_t i) const { return demand_[i]->open; }
  [[nodiscard]] std::size_t idleCap(std::size_t i) const;

  [[nodiscard]] const tcp::endpoint& target(std::size_t i) const { return targets_[i]; }
  // "IP:PORT" of endpoint i, the Host header of requests to it.
  [[nodiscard]] const std::string& hostHeader(std::size_t i) const { return host_headers_[i]; }
  // Closes every idle connection (shutdown, with the I/O threads stopped).
  void clear() {
    for (auto& v : idle_) v.clear();  // each connection counts itself out
  }

 private:
  IoExecutor ex_;
  std::vector<tcp::endpoint> targets_;
  std::vector<std::string> host_headers_;
  const Options& options_;
  GatewayCounters& counters_;
  std::vector<std::vector<std::unique_ptr<UpstreamConnection>>> idle_;
  std::vector<std::shared_ptr<UpstreamDemand>> demand_;
  void checkOut(std::size_t i, UpstreamConnection& c);
};

// Lets a client watcher abort the upstream exchange in progress.
struct AbortHandle {
  UpstreamConnection* active = nullptr;  // the connection in use, if any
  bool aborted = false;
  bool revoked = false;  // the abort is an in-flight eviction, not the client's hang-up
  void abort() {
    aborted = true;
    if (active != nullptr) {
      beast::error_code ec;
      active->stream.socket().close(ec);  // pending reads and writes complete with an error
    }
  }
};

// Interim (1xx) responses read before a final one; more fail the exchange (a server that never
// ends its interim responses).
inline constexpr int kMaxInterimResponses = 8;

enum class ProxyResult {
  kDone,              // the response was relayed
  kFailedBeforeHead,  // nothing was sent to the client: answer 502 (`error` says why)
  kTruncated,         // a streamed response broke off after its head was sent
  kClientGone,        // the client went away; the upstream request was aborted
  kRevoked,           // revoked (in-flight eviction) before anything was sent to the client
  kRevokedMidStream,  // revoked after a streamed response's head (and maybe chunks) went out
};

// Tokens served: a non-streamed response's "usage" object, or a stream's (StreamUsageScanner:
// its usage event, else an estimate).
struct TokenUsage {
  bool known = false;
  std::uint64_t promptTokens = 0;
  std::uint64_t completionTokens = 0;
};

struct ProxyRequest {
  // Filled from the response when not null (program-aware-fairness's served tokens): a
  // non-streamed body's "usage", a stream's usage event or its estimate (StreamUsageScanner).
  TokenUsage* usage = nullptr;
  std::size_t endpoint = 0;
  std::string endpointUrl;
  bool stream = false;
  long long queuedMs = 0;
  bool keepAlive = true;  // the client connection's
  // The client speaks HTTP/1.1: a stream goes out chunked. False (HTTP/1.0): the stream's body is
  // delimited by closing the connection, and keepAlive must be false.
  bool chunked = true;
  // Read when the response head goes out: the advisory x-llm-d-flow-band-headroom-requests value
  // (nullopt or no function: omitted). The gateway owns that header: the server's is dropped.
  std::function<std::optional<std::uint64_t>()> bandHeadroom;
  // Called once, on the first bytes of the response body (a stream's first event: the request
  // runs on its server); may be empty.
  std::function<void()> onFirstBody;
  // A non-streamed response's collected bytes are added here while it is held (overload.hpp);
  // null: not counted. Over Options::maxResponseBytes the exchange fails (502).
  BufferBudget* budget = nullptr;
};

Task<ProxyResult> proxy(UpstreamPool& pool, const Options& options, Request& request,
                        TcpStream& client, const ProxyRequest& what, AbortHandle& abort,
                        std::string& error, unsigned& status);

}  // namespace holdback::gateway
