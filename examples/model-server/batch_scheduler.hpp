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
//   Pool mode (Options::pool set, the flags --prefill-base-ms ...): the simulator's pool model
//   instead (step_engine.hpp): a sequence needs only its prompt tokens of KV free to start, its KV
//   grows by one token per decode step, and its tokens come from the server's decode steps, run by
//   runSteps() on one executor; Slot::awaitToken() waits for them.
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
#include <vector>

#include "step_engine.hpp"

namespace holdback_examples {

class BatchScheduler {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    int slots = 8;
    std::int64_t kvCapacityTokens = 16384;
    // Set: pool mode with these service times (the simulator's pool model).
    std::optional<holdback::sim::PoolTiming> pool;
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

    // Pool mode: suspends until token i (0-based) is out, and with `last` until the sequence has
    // finished too; false when stop() was called.
    [[nodiscard]] boost::asio::awaitable<bool> awaitToken(std::int64_t i, bool last);

   private:
    friend class BatchScheduler;
    Slot(BatchScheduler* owner, std::shared_ptr<Sequence> seq)
        : owner_(owner), seq_(std::move(seq)) {}
    BatchScheduler* owner_ = nullptr;
    std::shared_ptr<Sequence> seq_;
  };

  explicit BatchScheduler(Options options);

  // Suspends the calling coroutine until this sequence is admitted (FIFO) or the scheduler stops
  // (nullopt). promptTokens + maxTokens must be in [1, kvCapacityTokens] (not in pool mode); the
  // caller rejects larger requests.
  [[nodiscard]] boost::asio::awaitable<std::optional<Slot>> admit(std::int64_t promptTokens,
                                                                  std::int64_t maxTokens);

  // Pool mode: runs the decode steps until stop(); spawn it once on one executor.
  [[nodiscard]] boost::asio::awaitable<void> runSteps();
  [[nodiscard]] bool poolMode() const noexcept { return options_.pool.has_value(); }

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
    bool granted = false;       // guarded by mu_
    bool parked = false;        // guarded by mu_: suspended in admit(), to be woken by a post
    StepEngine::Sequence step;  // pool mode; guarded by mu_
  };

  static void wake(Sequence& s);
  void admitHeadsLocked();
  // Pool mode: nanoseconds since construction; wakes the sequences in changed_ (under mu_).
  [[nodiscard]] StepEngine::Nanos nowNs() const;
  void wakeChangedLocked();
  void releaseSlot(Sequence& s) noexcept;

  const Options options_;
  mutable std::mutex mu_;
  std::deque<std::shared_ptr<Sequence>> waiting_;
  std::set<Sequence*> running_;
  std::int64_t kv_in_use_ = 0;
  std::atomic<bool> stopped_{false};
  // Pool mode.
  const Clock::time_point epoch_ = Clock::now();
  std::optional<StepEngine> engine_;                     // guarded by mu_
  std::vector<StepEngine::Sequence*> changed_;           // guarded by mu_
  std::optional<boost::asio::steady_timer> step_timer_;  // set by runSteps()
  bool steps_parked_ = false;                            // guarded by mu_
};

}  // namespace holdback_examples
