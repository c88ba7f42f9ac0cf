#include "batch_scheduler.hpp"

#include <utility>

namespace holdback_examples {

BatchScheduler::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), kv_tokens_(other.kv_tokens_) {}

BatchScheduler::Slot& BatchScheduler::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    kv_tokens_ = other.kv_tokens_;
  }
  return *this;
}

void BatchScheduler::Slot::release() noexcept {
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->releaseSlot(kv_tokens_);
}

std::optional<BatchScheduler::Slot> BatchScheduler::admit(std::int64_t kvTokens) {
  std::unique_lock lock(mu_);
  const std::uint64_t ticket = next_ticket_++;
  admitted_.wait(lock, [&] {
    return stopped_ ||
           (ticket == head_ticket_ && running_ < static_cast<std::size_t>(options_.slots) &&
            (kv_in_use_ + kvTokens <= options_.kvCapacityTokens || running_ == 0));
  });
  // Whether admitted or stopped, this ticket leaves the queue; tickets are served in order, so
  // the head moves on (after stop() every waiter leaves and the order no longer matters).
  ++head_ticket_;
  if (stopped_) return std::nullopt;
  ++running_;
  kv_in_use_ += kvTokens;
  lock.unlock();
  admitted_.notify_all();  // the next head may fit too
  return Slot(this, kvTokens);
}

void BatchScheduler::releaseSlot(std::int64_t kvTokens) noexcept {
  {
    std::lock_guard lock(mu_);
    --running_;
    kv_in_use_ -= kvTokens;
  }
  admitted_.notify_all();
}

bool BatchScheduler::sleepUntil(Clock::time_point until) {
  std::unique_lock lock(mu_);
  return !stopped_cv_.wait_until(lock, until, [&] { return stopped_; });
}

void BatchScheduler::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  admitted_.notify_all();
  stopped_cv_.notify_all();
}

BatchScheduler::Snapshot BatchScheduler::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  s.waiting = static_cast<std::size_t>(next_ticket_ - head_ticket_);
  s.running = running_;
  s.kvTokensInUse = kv_in_use_;
  s.kvCacheUsage = static_cast<double>(kv_in_use_) / static_cast<double>(options_.kvCapacityTokens);
  return s;
}

}  // namespace holdback_examples
