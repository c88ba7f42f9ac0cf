// BatchScheduler: the continuous-batching admission of the fake model server.
//
// The algorithm
//   A sequence asks for a slot with admit(kvTokens), where kvTokens = prompt tokens + max_tokens
//   (the KV-cache blocks a real engine reserves for the whole sequence). Requests are admitted
//   strictly in arrival order (FIFO, no overtaking): the head of the queue runs as soon as
//     running < slots  and  (kvTokensInUse + kvTokens <= kvCapacityTokens  or  running == 0).
//   A running sequence holds its slot and its KV tokens until its Slot is destroyed (end of
//   generation, a failed write to a disconnected client, or shutdown). The gauges a vLLM server
//   exports follow from that state: waiting = queued sequences, running = admitted ones,
//   KV-cache usage = kvTokensInUse / kvCapacityTokens (in [0, 1]).
//   stop() wakes every waiter and sleeper: admit() then returns nullopt and sleepUntil() false.
//
// Locking
//   One mutex guards the counters; `admitted_` wakes waiters when a slot frees, `stopped_cv_`
//   wakes token sleepers on stop() only (a token sleeper is never woken by other sequences).
//
// Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

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

  // A running sequence. Move-only; releases its slot and KV tokens exactly once (release() or
  // the destructor). Thread safety: thread-compatible.
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { release(); }
    void release() noexcept;

   private:
    friend class BatchScheduler;
    Slot(BatchScheduler* owner, std::int64_t kvTokens) : owner_(owner), kv_tokens_(kvTokens) {}
    BatchScheduler* owner_ = nullptr;
    std::int64_t kv_tokens_ = 0;
  };

  explicit BatchScheduler(Options options) : options_(options) {}

  // Blocks until this sequence is admitted (FIFO) or the scheduler stops (nullopt). kvTokens must
  // be in [1, kvCapacityTokens]; the caller rejects larger requests.
  [[nodiscard]] std::optional<Slot> admit(std::int64_t kvTokens);

  // Sleeps until `until`; false when stop() was called (at once, or while sleeping).
  [[nodiscard]] bool sleepUntil(Clock::time_point until);

  void stop();
  [[nodiscard]] Snapshot snapshot() const;
  [[nodiscard]] const Options& options() const noexcept { return options_; }

 private:
  void releaseSlot(std::int64_t kvTokens) noexcept;

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable admitted_;
  std::condition_variable stopped_cv_;
  std::uint64_t next_ticket_ = 0;  // handed to the next arrival
  std::uint64_t head_ticket_ = 0;  // the oldest sequence still waiting
  std::size_t running_ = 0;
  std::int64_t kv_in_use_ = 0;
  bool stopped_ = false;
};

}  // namespace holdback_examples
