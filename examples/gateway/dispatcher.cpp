#include "dispatcher.hpp"

#include <chrono>

namespace holdback::gateway {

using namespace std::chrono_literals;

void Dispatcher::start() {
  thread_ = std::thread([this] { loop(); });
}

void Dispatcher::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Dispatcher::arrived() noexcept {
  waiting_.fetch_add(1);  // seq_cst: pairs with the driver's ticking_/waiting_ (see loop())
}

DispatchResult Dispatcher::cycleOnce() noexcept {
  std::lock_guard lock(cycle_mu_);
  cycles_.fetch_add(1, std::memory_order_relaxed);
  return controller_.dispatchCycle(Clock::now());
}

void Dispatcher::dispatchNow() noexcept {
  while (waiting_.load(std::memory_order_relaxed) > 0) {
    if (cycleOnce().kind != DispatchResult::Kind::kDispatched) break;
  }
  // Requests still wait (gated, or another thread is between arrived() and its own cycle). A
  // driver that is already ticking retries within one tick without being told; only an idle one
  // (sleeping until the next arrival) is woken. Waking it on every request cost a futex call and
  // two context switches per request under load.
  if (waiting_.load() > 0 && !ticking_.load()) {
    {
      std::lock_guard lock(mu_);
      arrival_ = true;
    }
    cv_.notify_one();
  }
}

void Dispatcher::finalized(bool dispatched) noexcept {
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  if (dispatched) dispatched_.fetch_add(1, std::memory_order_relaxed);
}

double Dispatcher::dispatchRate() const {
  std::lock_guard lock(rate_mu_);
  return rate_;
}

void Dispatcher::loop() {
  TimePoint next_expiry = Clock::now() + expiry_interval_;
  TimePoint rate_window = Clock::now();
  std::uint64_t rate_count = 0;
  std::unique_lock lock(mu_);
  while (!stop_) {
    const bool work = waiting_.load(std::memory_order_relaxed) > 0;
    // Going idle: the driver clears ticking_ and then reads waiting_; a request's thread bumps
    // waiting_ and then (in dispatchNow) reads ticking_. All four are sequentially consistent, so
    // one of the two sees the other: the driver stays awake, or the request wakes it.
    if (!arrival_) {
      if (work) {
        cv_.wait_for(lock, tick_, [&] { return stop_ || arrival_; });
      } else {
        ticking_.store(false);
        if (waiting_.load() == 0) cv_.wait_for(lock, 5s, [&] { return stop_ || arrival_; });
        ticking_.store(true);
      }
    }
    if (stop_) break;
    arrival_ = false;
    lock.unlock();
    TimePoint now = Clock::now();
    if (now >= next_expiry || waiting_.load(std::memory_order_relaxed) == 0) {
      controller_.expire(now);
      next_expiry = now + expiry_interval_;
    }
    while (waiting_.load(std::memory_order_relaxed) > 0) {
      if (cycleOnce().kind != DispatchResult::Kind::kDispatched) break;
    }
    // The drain rate for Retry-After: an EWMA (weight kRateEwmaWeight per window) of the dispatch
    // rates of windows of >= 2 s, so one burst or one stall does not swing the advice.
    now = Clock::now();
    if (now - rate_window >= 2s) {
      const std::uint64_t total = dispatched_.load(std::memory_order_relaxed);
      const double sample =
          double(total - rate_count) / std::chrono::duration<double>(now - rate_window).count();
      std::lock_guard rate_lock(rate_mu_);
      rate_ = rate_samples_++ == 0 ? sample
                                   : kRateEwmaWeight * sample + (1.0 - kRateEwmaWeight) * rate_;
      rate_count = total;
      rate_window = now;
    }
    lock.lock();
  }
}

}  // namespace holdback::gateway
