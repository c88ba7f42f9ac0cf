// BatchScheduler: the continuous-batching admission of the fake model server.
//
// The algorithm
//   A sequence asks for a slot with admit(kvTokens), where kvTokens = prompt tokens + max_tokens
//   (the KV-cache blocks a real engine reserves for the whole sequence). Requests are admitted
//   strictly in arrival order (FIFO, no overtaking): the head of the queue runs as soon as
//     running < slots  and  (kvTokensInUse + kvTokens <= kvCapacityTokens  or  running == 0).
//   A running sequence holds its slot and its KV tokens until its Slot is destroyed (end of
//   generation, a client that went away, or shutdown). The gauges a vLLM server exports follow
//   from that state: waiting = queued sequences, running = admitted ones, KV-cache usage =
//   kvTokensInUse / kvCapacityTokens (in [0, 1]).
//   stop() wakes every waiter and sleeper: admit() then returns nullopt and sleepUntil() false.
//
// Waiting is asynchronous: admit() and Slot::sleepUntil() suspend the calling coroutine (on a
// single-threaded io_context, the connection's) on the sequence's own timer, and the scheduler
// wakes it by posting a cancel of that timer to its executor. A freed slot is handed to the queue
// head(s) directly (in release, under the lock), so nothing else can overtake them.
//
// Locking
//   One mutex guards the queue and the counters; no coroutine suspends while holding it.
//
// Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

namespace holdback_examples {

class BatchScheduler {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    int slots = 8;
    std::int64_t kvCapacityTokens = 16384;
  };

  struct Snapshot {
    std::size_t waiting = 0;
    std::size_t running = 0;
    std::int64_t kvTokensInUse = 0;
    double kvCacheUsage = 0.0;  // kvTokensInUse / kvCapacityTokens
  };

 private:
  struct Sequence;

 public:
  // A running sequence. Move-only; releases its slot and KV tokens exactly once (release() or
  // the destructor). Thread safety: thread-compatible (used by the coroutine that admitted it).
  class Slot {
   public:
    Slot(Slot&& other) noexcept = default;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { release(); }
    void release() noexcept;

    // Suspends until `until`; false when stop() was called (at once, or while sleeping).
    [[nodiscard]] boost::asio::awaitable<bool> sleepUntil(Clock::time_point until);

   private:
    friend class BatchScheduler;
    Slot(BatchScheduler* owner, std::shared_ptr<Sequence> seq)
        : owner_(owner), seq_(std::move(seq)) {}
    BatchScheduler* owner_ = nullptr;
    std::shared_ptr<Sequence> seq_;
  };

  explicit BatchScheduler(Options options) : options_(options) {}

  // Suspends the calling coroutine until this sequence is admitted (FIFO) or the scheduler stops
  // (nullopt). kvTokens must be in [1, kvCapacityTokens]; the caller rejects larger requests.
  [[nodiscard]] boost::asio::awaitable<std::optional<Slot>> admit(std::int64_t kvTokens);

  void stop();
  [[nodiscard]] Snapshot snapshot() const;
  [[nodiscard]] const Options& options() const noexcept { return options_; }

 private:
  // One sequence, waiting or running. `timer` never expires while it waits for admission (only
  // a posted cancel wakes it); while it runs, it times the token sleeps.
  struct Sequence : std::enable_shared_from_this<Sequence> {
    Sequence(const boost::asio::any_io_executor& ex, std::int64_t kv) : timer(ex), kvTokens(kv) {}
    boost::asio::steady_timer timer;
    const std::int64_t kvTokens;
    bool granted = false;  // guarded by mu_
    bool parked = false;   // guarded by mu_: suspended in admit(), to be woken by a post
  };

  static void wake(Sequence& s);
  void admitHeadsLocked();
  void releaseSlot(Sequence& s) noexcept;

  const Options options_;
  mutable std::mutex mu_;
  std::deque<std::shared_ptr<Sequence>> waiting_;
  std::set<Sequence*> running_;
  std::int64_t kv_in_use_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace holdback_examples
