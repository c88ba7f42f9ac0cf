#include "client_watch.hpp"

#include <sys/socket.h>

#include <cerrno>

#include "draining_read.hpp"

namespace holdback::gateway {

void clientHungUp(Exchange& ex, GatewayCounters& counters) {
  ex.clientGone = true;
  if (!ex.done) {
    ex.abandoned.store(true, std::memory_order_release);  // a parked request ends at once
    if (ex.ticket.cancel()) counters.queuedCancelled.fetch_add(1, std::memory_order_relaxed);
  } else if (ex.abort.active != nullptr) {
    counters.upstreamAborted.fetch_add(1, std::memory_order_relaxed);
    ex.abort.abort();
  } else {
    ex.abort.aborted = true;
  }
}

namespace {

// The watch while pipelined bytes are buffered: waits for the socket to become readable; EOF or an
// error is the hang-up, more bytes end the watch without acting.
void watchReadiness(const std::shared_ptr<Lookahead>& la, TcpSocket& socket,
                    GatewayCounters& counters) {
  socket.async_wait(tcp::socket::wait_read, [la, &socket, &counters](const beast::error_code& ec) {
    // Cancelled (the exchange ended, or the socket closed): `socket` may be gone; touch nothing.
    if (ec || la->watching == nullptr) return;
    char b = 0;
    const ssize_t n = ::recv(socket.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      watchReadiness(la, socket, counters);
      return;
    }
    clientHungUp(*la->watching, counters);
  });
}

}  // namespace

void watchClient(Lookahead& la, Exchange& ex, TcpSocket& socket, GatewayCounters& counters) {
  la.watching = &ex;
  if (la.hungUp()) {
    clientHungUp(ex, counters);
  } else if (!la.pending && !la.complete) {
    watchReadiness(la.shared_from_this(), socket, counters);
  }
}

// Ends the watch of the exchange being served: the read, if any, goes on as the next request's.
void endWatch(Lookahead& la, TcpSocket& socket) {
  la.watching = nullptr;
  if (!la.pending) {  // no read in progress: cancel() ends the readiness wait, if there is one
    beast::error_code ignored;
    socket.cancel(ignored);
  }
}

namespace {
void armIdleWatch(const std::shared_ptr<Lookahead>& la) {
  la->idleArmed = true;
  la->idleTimer.expires_at(la->idleSince + la->idleTimeout);
  la->idleTimer.async_wait([la](const beast::error_code& ec) {
    la->idleArmed = false;
    if (ec || !la->idleWaiting) return;  // cancelled (the session ended), or not waiting
    if (std::chrono::steady_clock::now() - la->idleSince >= la->idleTimeout) {
      la->idleExpired = true;
      wakeSession(*la);
      return;
    }
    armIdleWatch(la);  // the wait in progress started after the armed one: its own deadline
  });
}
}  // namespace

void waitIdle(const std::shared_ptr<Lookahead>& la, std::chrono::steady_clock::duration timeout) {
  la->idleSince = std::chrono::steady_clock::now();
  la->idleTimeout = timeout;
  la->idleWaiting = true;
  la->idleExpired = false;
  if (!la->idleArmed) armIdleWatch(la);
}

namespace {
void lookaheadDone(Lookahead& la, GatewayCounters& counters, const beast::error_code& ec,
                   std::size_t n) {
  la.pending = false;
  la.complete = true;
  la.ec = ec;
  la.n = n;
  if (la.watching != nullptr && la.hungUp()) clientHungUp(*la.watching, counters);
  wakeSession(la);
}

// The read's completion handler. Destroyed without having run (the I/O context shutting down),
// it drops the session's continuation (Lookahead::resume), which holds the Lookahead.
struct LookaheadCompletion {
  std::shared_ptr<Lookahead> la;
  GatewayCounters* counters;
  bool ran = false;
  LookaheadCompletion(std::shared_ptr<Lookahead> l, GatewayCounters& c)
      : la(std::move(l)), counters(&c) {}
  LookaheadCompletion(LookaheadCompletion&& o) noexcept
      : la(std::move(o.la)), counters(o.counters), ran(o.ran) {}
  LookaheadCompletion(const LookaheadCompletion&) = delete;
  LookaheadCompletion& operator=(const LookaheadCompletion&) = delete;
  LookaheadCompletion& operator=(LookaheadCompletion&&) = delete;
  ~LookaheadCompletion() {
    if (la && !ran && la->resume) {
      asio::any_completion_handler<void()> dropped;
      dropped.swap(la->resume);
    }
  }
  void operator()(const beast::error_code& ec, std::size_t n) {
    ran = true;
    lookaheadDone(*la, *counters, ec, n);
  }
};
}  // namespace

void startLookahead(const std::shared_ptr<Lookahead>& la, TcpSocket& socket,
                    GatewayCounters& counters) {
  la->pending = true;
  la->complete = false;
#ifdef HOLDBACK_GATEWAY_LAZY_READ
  const LazyBlockBuffer into(la->bytes);
#else
  if (!la->bytes) la->bytes = newReadBlock();
  if (!la->bytes) {  // out of memory: the read fails, as a read would
    asio::post(socket.get_executor(), [done = LookaheadCompletion(la, counters)]() mutable {
      done(asio::error::no_memory, 0);
    });
    return;
  }
  const DrainingBuffer into(la->bytes.get(), kReadBlockBytes);
#endif
  socket.async_read_some(into, LookaheadCompletion(la, counters));
}

}  // namespace holdback::gateway
