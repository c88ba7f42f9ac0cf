// Implementation of holdback/flow/runner.hpp (compiled by src/flow.cpp, or included by the header
// in header-only mode).
#pragma once

#include "holdback/flow/runner.hpp"

#include <utility>

#include "holdback/flow/flow_controller.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE FlowControllerRunner::FlowControllerRunner(FlowController& controller,
                                                           std::function<TimePoint()> clock,
                                                           Duration tickInterval,
                                                           Duration expiryInterval)
    : controller_(controller),
      clock_(std::move(clock)),
      tick_interval_(tickInterval),
      expiry_interval_(expiryInterval),
      thread_([this] { run(); }) {}

HOLDBACK_INLINE FlowControllerRunner::~FlowControllerRunner() {
  stop();
  // Destroyed from its own thread (a callback destroyed the controller): it cannot join itself.
  if (thread_.joinable()) thread_.detach();
}

HOLDBACK_INLINE void FlowControllerRunner::notifyArrival() noexcept {
  {
    MutexLock lock(mu_);
    pending_arrivals_ += 1;
  }
  cv_.notifyOne();
}

HOLDBACK_INLINE void FlowControllerRunner::stop() noexcept {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notifyAll();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

HOLDBACK_INLINE void FlowControllerRunner::run() noexcept {
  TimePoint next_expiry = clock_() + expiry_interval_;
  while (true) {
    std::size_t arrivals = 0;
    {
      MutexLock lock(mu_);
      if (!stop_ && pending_arrivals_ == 0) cv_.waitFor(mu_, tick_interval_);
      if (stop_) return;
      // One cycle per arrival (as the reference), or one for the tick.
      arrivals = std::exchange(pending_arrivals_, 0);
    }
    const TimePoint now = clock_();
    if (now >= next_expiry) {
      (void)controller_.expire(now);
      next_expiry = now + expiry_interval_;
    }
    const std::size_t cycles = arrivals == 0 ? 1 : arrivals;
    for (std::size_t i = 0; i < cycles; ++i) (void)controller_.dispatchCycle(clock_());
  }
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
