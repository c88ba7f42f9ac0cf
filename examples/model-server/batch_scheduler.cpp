#include "batch_scheduler.hpp"

#include <boost/asio/as_tuple.hpp>
#include <utility>

namespace holdback_examples {

namespace asio = boost::asio;

BatchScheduler::Slot& BatchScheduler::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    seq_ = std::move(other.seq_);
  }
  return *this;
}

void BatchScheduler::Slot::release() noexcept {
  if (owner_ != nullptr && seq_) std::exchange(owner_, nullptr)->releaseSlot(*seq_);
}

asio::awaitable<bool> BatchScheduler::Slot::sleepUntil(Clock::time_point until) {
  if (owner_->stopped_) co_return false;
  // stop() posts a cancel to this executor: it runs once this coroutine is suspended below.
  seq_->timer.expires_at(until);
  (void)co_await seq_->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return !owner_->stopped_;
}

void BatchScheduler::wake(Sequence& s) {
  asio::post(s.timer.get_executor(), [self = s.shared_from_this()] { self->timer.cancel(); });
}

asio::awaitable<std::optional<BatchScheduler::Slot>> BatchScheduler::admit(std::int64_t kvTokens) {
  auto seq = std::make_shared<Sequence>(co_await asio::this_coro::executor, kvTokens);
  seq->timer.expires_at(Clock::time_point::max());
  {
    std::lock_guard lock(mu_);
    if (!stopped_) {
      waiting_.push_back(seq);
      admitHeadsLocked();
    }
  }
  for (;;) {
    {
      std::lock_guard lock(mu_);
      seq->parked = false;
      if (seq->granted) co_return Slot(this, std::move(seq));
      if (stopped_) co_return std::nullopt;  // stop() emptied the queue
      seq->parked = true;
    }
    (void)co_await seq->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

void BatchScheduler::admitHeadsLocked() {
  while (!waiting_.empty()) {
    Sequence& head = *waiting_.front();
    const bool fits = running_.size() < static_cast<std::size_t>(options_.slots) &&
                      (kv_in_use_ + head.kvTokens <= options_.kvCapacityTokens || running_.empty());
    if (!fits) return;
    running_.insert(&head);
    kv_in_use_ += head.kvTokens;
    head.granted = true;
    if (head.parked) wake(head);
    waiting_.pop_front();
  }
}

void BatchScheduler::releaseSlot(Sequence& s) noexcept {
  std::lock_guard lock(mu_);
  running_.erase(&s);
  kv_in_use_ -= s.kvTokens;
  if (!stopped_) admitHeadsLocked();
}

void BatchScheduler::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  for (const auto& w : waiting_) {
    if (w->parked) wake(*w);
  }
  waiting_.clear();
  for (Sequence* r : running_) wake(*r);  // ends a token sleep in progress
}

BatchScheduler::Snapshot BatchScheduler::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  s.waiting = waiting_.size();
  s.running = running_.size();
  s.kvTokensInUse = kv_in_use_;
  s.kvCacheUsage = static_cast<double>(kv_in_use_) / static_cast<double>(options_.kvCapacityTokens);
  return s;
}

}  // namespace holdback_examples
