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

asio::awaitable<bool> BatchScheduler::Slot::awaitToken(std::int64_t i, bool last) {
  if (i == 0) {
    StepEngine::Nanos first = 0;
    {
      std::lock_guard lock(owner_->mu_);
      first = seq_->step.firstToken;
    }
    const auto due = owner_->epoch_ + std::chrono::nanoseconds(first);
    while (Clock::now() < due) {
      if (!co_await sleepUntil(due)) co_return false;
    }
  }
  for (;;) {
    {
      std::lock_guard lock(owner_->mu_);
      seq_->parked = false;
      if (owner_->stopped_) co_return false;
      if ((i == 0 || seq_->step.generated > i) && (!last || seq_->step.done)) co_return true;
      seq_->parked = true;
      seq_->timer.expires_at(Clock::time_point::max());
    }
    (void)co_await seq_->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
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

BatchScheduler::BatchScheduler(Options options) : options_(options) {
  if (options_.pool) {
    engine_.emplace(StepEngine::Options{.timing = *options_.pool,
                                        .slots = options_.slots,
                                        .kvCapacityTokens = options_.kvCapacityTokens});
  }
}

StepEngine::Nanos BatchScheduler::nowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch_).count();
}

void BatchScheduler::wakeChangedLocked() {
  for (StepEngine::Sequence* c : changed_) {
    auto& owner = *static_cast<Sequence*>(c->user);
    if (c->running) owner.granted = true;
    if (owner.parked) wake(owner);
  }
  changed_.clear();
  // The first sequence of an empty batch schedules a step: wake the step loop.
  if (steps_parked_ && engine_->nextStep() && step_timer_) {
    steps_parked_ = false;
    asio::post(step_timer_->get_executor(), [this] { step_timer_->cancel(); });
  }
}

asio::awaitable<void> BatchScheduler::runSteps() {
  {
    std::lock_guard lock(mu_);
    step_timer_.emplace(co_await asio::this_coro::executor);
  }
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopped_) break;
      const auto next = engine_->nextStep();
      steps_parked_ = !next;
      step_timer_->expires_at(next ? epoch_ + std::chrono::nanoseconds(*next)
                                   : Clock::time_point::max());
    }
    (void)co_await step_timer_->async_wait(asio::as_tuple(asio::use_awaitable));
    std::lock_guard lock(mu_);
    if (stopped_) break;
    steps_parked_ = false;
    // A step late on the wall clock runs at its due time: the batch keeps the model's schedule.
    if (const auto next = engine_->nextStep(); next && nowNs() >= *next) {
      engine_->step(*next, changed_);
      wakeChangedLocked();
    }
  }
}

asio::awaitable<std::optional<BatchScheduler::Slot>> BatchScheduler::admit(
    std::int64_t promptTokens, std::int64_t maxTokens) {
  auto seq = std::make_shared<Sequence>(co_await asio::this_coro::executor,
                                        engine_ ? promptTokens : promptTokens + maxTokens);
  seq->timer.expires_at(Clock::time_point::max());
  seq->step.input = promptTokens;
  seq->step.output = maxTokens;
  seq->step.user = seq.get();
  {
    std::lock_guard lock(mu_);
    if (!stopped_) {
      if (engine_) {
        running_.insert(seq.get());  // pool mode: every sequence, waiting or running
        engine_->enqueue(seq->step, nowNs(), changed_);
        wakeChangedLocked();
      } else {
        waiting_.push_back(seq);
        admitHeadsLocked();
      }
    }
  }
  for (;;) {
    {
      std::lock_guard lock(mu_);
      seq->parked = false;
      if (seq->granted) co_return Slot(this, std::move(seq));
      if (stopped_) {  // stop() emptied the queue
        if (engine_ && running_.erase(seq.get()) > 0) {
          engine_->remove(seq->step, nowNs(), changed_);
          changed_.clear();
        }
        co_return std::nullopt;
      }
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
  if (engine_) {
    running_.erase(&s);
    engine_->remove(s.step, nowNs(), changed_);  // no-op once it finished
    if (stopped_) {
      changed_.clear();
    } else {
      wakeChangedLocked();
    }
    return;
  }
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
  if (step_timer_) asio::post(step_timer_->get_executor(), [this] { step_timer_->cancel(); });
}

BatchScheduler::Snapshot BatchScheduler::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  s.waiting = engine_ ? engine_->waiting() : waiting_.size();
  s.running = engine_ ? engine_->running() : running_.size();
  s.kvTokensInUse = engine_ ? engine_->kvInUse() : kv_in_use_;
  s.kvCacheUsage = static_cast<double>(kv_in_use_) / static_cast<double>(options_.kvCapacityTokens);
  return s;
}

}  // namespace holdback_examples
