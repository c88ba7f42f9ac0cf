// Drives a FlowController's dispatch cycles from the gateway, instead of the library's runner
// thread (which ticks every millisecond even when nothing is queued):
//   - idle (nothing queued): the thread sleeps until an arrival (or, every 5 s, runs the
//     controller's expire() for flow and band garbage collection);
//   - on an arrival: cycles until nothing more is dispatchable;
//   - while work waits (gated or queued): one more round every `tick`, and expire() every
//     `expiryInterval` for the TTL sweep.
// The host calls arrived() before each enqueue, dispatchNow() after it (one or more cycles on the
// caller's thread: an uncontended request is dispatched without waking another thread) and after
// each request's end (a completion is what a request gated by the dispatch ledger waits for), and
// finalized() from its outcome callback, so the driver knows without a lock whether anything is
// queued. It also measures the recent dispatch
// rate, from which the gateway derives Retry-After (gateway_http.hpp).
// One cycle runs at a time (cycle_mu_): a dispatch's outcome callback, which picks the endpoint
// and records the dispatch in the pool's ledger, runs inside dispatchCycle, so the next cycle's
// saturation counts it. Cycles that overlapped (several I/O threads cycling after requests ended
// together) each read the pool before the others' picks were recorded, and admitted more work
// than its room: on a KV-bound pool, batch requests sent to a server whose cache could not take
// them, and interactive requests queued behind them there.
//
// Thread safety: thread-safe (arrived, finalized, dispatchRate and queued from any thread; start
// and stop from one owner thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "holdback/flow/flow_controller.hpp"

namespace holdback::gateway {

class Dispatcher {
 public:
  Dispatcher(FlowController& controller, Duration tick, Duration expiryInterval)
      : controller_(controller), tick_(tick), expiry_interval_(expiryInterval) {}
  ~Dispatcher() { stop(); }
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  void start();
  void stop();

  // Call before enqueue (the outcome may arrive before enqueue returns).
  void arrived() noexcept;
  // Call after enqueue and after a dispatched request ends: cycles on this thread until nothing
  // more is dispatchable (nothing queued: two atomic loads); if requests still wait (gated),
  // wakes the driver thread to retry every tick.
  void dispatchNow() noexcept;
  // Call once per outcome; `dispatched` for a dispatch.
  void finalized(bool dispatched) noexcept;

  // Requests enqueued and not yet finalized.
  [[nodiscard]] std::int64_t queued() const noexcept {
    return waiting_.load(std::memory_order_relaxed);
  }
  // Dispatches per second: an EWMA over windows of >= 2 s (0 until the first window ends).
  [[nodiscard]] double dispatchRate() const;
  // dispatchCycle calls so far (to show that an idle gateway does not spin).
  [[nodiscard]] std::uint64_t cycles() const noexcept {
    return cycles_.load(std::memory_order_relaxed);
  }

 private:
  void loop();
  // One dispatchCycle under cycle_mu_ (see the header comment).
  DispatchResult cycleOnce() noexcept;

  FlowController& controller_;
  const Duration tick_;
  const Duration expiry_interval_;
  std::atomic<std::int64_t> waiting_{0};
  std::atomic<std::uint64_t> dispatched_{0};
  std::atomic<std::uint64_t> cycles_{0};
  // Held for one dispatchCycle and the outcome callbacks it runs (never while waiting for mu_).
  std::mutex cycle_mu_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;     // guarded by mu_
  bool arrival_ = false;  // guarded by mu_
  // False while the driver sleeps until the next arrival (nothing waits); true while it runs or
  // retries every tick. Written under mu_, read without it by dispatchNow().
  std::atomic<bool> ticking_{true};
  std::thread thread_;

  mutable std::mutex rate_mu_;
  double rate_ = 0.0;               // guarded by rate_mu_
  std::uint64_t rate_samples_ = 0;  // guarded by rate_mu_
  static constexpr double kRateEwmaWeight = 0.5;
};

}  // namespace holdback::gateway
