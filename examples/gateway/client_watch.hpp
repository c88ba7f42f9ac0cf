// The client side of one request being served: its rendezvous with the flow controller
// (Exchange, an OutcomeSink) and the connection's watch for the client hanging up (Lookahead:
// the read of the client's next bytes that is also the next request's read).
//
// Thread safety: thread-compatible; everything here lives on the connection's I/O thread
// (Exchange::deliver and Exchange::revoke post there from any thread).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include <boost/asio/any_completion_handler.hpp>

#include "draining_read.hpp"
#include "gateway.hpp"
#include "net.hpp"
#include "upstream.hpp"

namespace holdback::gateway {

// One request's rendezvous with the controller (OutcomeSink), its ticket, and what a client
// hang-up or a revocation must undo. Lives on the connection's I/O thread; deliver() and revoke()
// post there.
struct Exchange : OutcomeSink, std::enable_shared_from_this<Exchange> {
  Exchange(const IoExecutor& ex, Gateway& g) : executor(ex), gw(g) {}
  void deliver(Outcome o, std::optional<Pool::Dispatch> d, Duration q) override {
    // Decided on the request's own I/O thread (the usual case: enqueue, or another request's end,
    // cycled inline): recorded at once, and the coroutine does not suspend for it.
    if (executor.running_in_this_thread()) {
      record(o, std::move(d), q);
      return;
    }
    // From another thread: the handle travels in a shared_ptr (the posted function must be
    // copyable); if the post never runs, destroying it releases the handle.
    auto held = std::make_shared<std::optional<Pool::Dispatch>>(std::move(d));
    asio::dispatch(executor, [self = shared_from_this(), o, held, q] {
      self->record(o, std::move(*held), q);
    });
  }
  void record(Outcome o, std::optional<Pool::Dispatch> d, Duration q) {
    done = true;
    outcome = o;
    leaseHeld = o.dispatched();
    dispatch = std::move(d);
    queued = q;
    if (wake) wake->cancel();
  }
  // The timer the coroutine waits on until `done` (record() cancels it). Made only for a request
  // that waits: the usual one is dispatched inline by its own enqueue, and constructing and
  // destroying a timer costs a lock in Asio's service registry.
  IoTimer& waiter() {
    if (!wake) wake.emplace(executor, IoTimer::time_point::max());
    return *wake;
  }
  void revoke(HttpDisposition disposition) override {
    asio::post(executor, [self = shared_from_this(), disposition] {
      // Too late: the upstream exchange is over (the lease was released: this revocation raced
      // with the natural completion, a failure or the client's hang-up), or the request never
      // held a lease. The release already sent stands.
      if (!self->leaseHeld || self->finished) {
        self->gw.counters().evictionsTooLate.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      self->revoked = true;
      self->evictedAs = disposition;
      self->abort.revoked = true;
      self->abort.abort();  // closes the upstream connection if one is in use
    });
  }
  // The one release of this request's lease (no-op when none is held or it already ended).
  void endLease() {
    if (!leaseHeld) return;
    leaseHeld = false;
    gw.endLease(ticket.id());
  }
  IoExecutor executor;
  std::optional<IoTimer> wake;  // see waiter()
  Gateway& gw;
  bool done = false;
  Outcome outcome;
  std::optional<Pool::Dispatch> dispatch;  // the endpoint and its ledger handle
  Duration queued{};
  Ticket ticket;
  bool finished = false;  // the exchange is over: the watch must not touch anything
  bool clientGone = false;
  bool leaseHeld = false;  // dispatched, and endLease() not yet called
  bool revoked = false;    // in-flight eviction revoked it before its upstream exchange ended
  HttpDisposition evictedAs = kEvictedHttp;
  AbortHandle abort;
};

// A client hang-up while its request is queued or proxied: cancels the ticket, or aborts the
// upstream exchange at once (closing the upstream connection), or, between the two, marks the
// exchange aborted so that it is not proxied.
void clientHungUp(Exchange& ex, GatewayCounters& counters);

// The connection's read of the client's next bytes, started as soon as a request has been read
// whole (with no pipelined bytes behind it) and kept in progress while the request is served: it
// is both the hang-up watch and the read of the next request. EOF or an error while an exchange
// is attached (`watching`) is the client's hang-up (clientHungUp); bytes are the next request,
// kept in `bytes` until the session takes them, and end the watch without acting. A client that
// half-closes its sending side after the request is taken as gone (documented). One read for
// both, instead of a readiness wait per request for the watch and another read after the reply,
// saves a system call per request (asio re-arms a readiness wait with epoll_ctl each time); the
// read goes through DrainingBuffer (draining_read.hpp), so that, started after a read that
// drained the socket, it costs no system call until the client sends.
// When the client's pipelined bytes are already buffered, no read is started (the session parses
// them first): the watch is then a readiness wait with a MSG_PEEK (watchReadiness), cancelled
// when the exchange ends (endWatch: with no read in progress, it is the socket's only operation).
// Shared with the completion handlers, which can run after the session has ended.
struct Lookahead : std::enable_shared_from_this<Lookahead> {
  explicit Lookahead(const IoExecutor& ex) : idleTimer(ex) {}
  // The bytes the read brought (`n` of them), kept until the session takes them: a block taken
  // only when bytes arrive (LazyBlockBuffer, draining_read.hpp), so a connection waiting for its
  // client holds none. The session gives it back (releaseBytes) once it has parsed them.
  ReadBlock bytes;
  bool pending = false;   // the read is in progress
  bool complete = false;  // it completed with `ec` and `n`, not yet taken by the session
  beast::error_code ec;
  std::size_t n = 0;
  Exchange* watching = nullptr;  // the exchange a hang-up acts on (set while one is served)
  // The session's wait for the read (waitForLookahead): its coroutine's continuation, resumed
  // directly (wakeSession) by the read's completion or the idle watchdog. A timer's wait, which
  // this replaces, went through the reactor's timer queue (a lock, a heap shared by the thread's
  // connections) and a posted completion per request. Dropped, not resumed, if the read's
  // handler is destroyed without running (the I/O context shutting down), so that the session's
  // coroutine, which holds this Lookahead, is destroyed with it.
  asio::any_completion_handler<void()> resume;

  // The idle timeout (--idle-timeout-s) without a timer armed and cancelled around every wait for
  // a request: waitIdle() marks the start of the wait, and one idle watchdog wait, re-armed only
  // when it expires, ends a wait that has lasted the whole timeout (`idleExpired`, and the
  // session woken). Between waits (`idleWaiting` false) an expiry does nothing.
  IoTimer idleTimer;
  std::chrono::steady_clock::time_point idleSince{};
  std::chrono::steady_clock::duration idleTimeout{};
  bool idleArmed = false;
  bool idleWaiting = false;
  bool idleExpired = false;

  void releaseBytes() noexcept { bytes.reset(); }
  [[nodiscard]] bool hungUp() const {
    return complete && ec && ec != asio::error::operation_aborted;
  }
};

// The session's wait until the read completes or the idle watchdog ends the wait (co_await it
// while `la.pending`; it can also end with the read still pending, see idleExpired).
inline auto waitForLookahead(Lookahead& la) {
  return asio::async_initiate<const asio::use_awaitable_t<IoExecutor>&, void()>(
      [&la](auto handler) {
        asio::any_completion_handler<void()> h(std::move(handler));
        la.resume.swap(h);
      },
      kAwait);
}

// Resumes the session's wait, if it is waiting (in this call: the caller must touch nothing of
// the session's afterwards).
inline void wakeSession(Lookahead& la) {
  if (!la.resume) return;
  asio::any_completion_handler<void()> h;
  h.swap(la.resume);
  std::move(h)();
}

// Attaches the exchange being served to the connection's watch: a hang-up already seen acts on
// it at once; a read in progress watches; with neither (pipelined bytes buffered), a readiness
// wait does. Bytes already read (a pipelined request) mean there is nothing to watch.
void watchClient(Lookahead& la, Exchange& ex, TcpSocket& socket, GatewayCounters& counters);

// Ends the watch of the exchange being served: the read, if any, goes on as the next request's.
void endWatch(Lookahead& la, TcpSocket& socket);

// Marks the start of the session's wait for the next request's first bytes, bounded by `timeout`
// (see Lookahead::idleTimer). The wait ends with idleDone().
void waitIdle(const std::shared_ptr<Lookahead>& la, std::chrono::steady_clock::duration timeout);
inline void idleDone(Lookahead& la) {
  la.idleWaiting = false;
  la.idleExpired = false;
}

// Starts the lookahead read (the socket's read of the client's next bytes); its completion
// wakes `la->wake`.
void startLookahead(const std::shared_ptr<Lookahead>& la, TcpSocket& socket,
                    GatewayCounters& counters);

}  // namespace holdback::gateway
