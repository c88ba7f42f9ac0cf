// StepEngine: the simulator's pool model for one server (src/sim/pool_timing.hpp), on a clock the
// caller supplies, with no I/O: the fake model server's --pool-model mode runs it under
// BatchScheduler's lock, and a test runs it against the simulator on the same requests.
//
// The algorithm (the same as the simulator's, src/sim/pool_model.cpp)
//   enqueue() appends a sequence to the FIFO queue and admits queue heads while
//   admitsHead(running, slots, kvInUse, input, kvCapacityTokens) holds. An admitted sequence holds
//   its input in KV, has its first token at admission + prefill(input) and counts 1 generated
//   token. The batch advances in decode steps: when the first sequence joins an empty batch a step
//   is due tpot(running) later; a step gives every sequence past its first token one more token
//   (one more KV token each), finishes those that reached their output (they leave the batch and
//   free their KV), admits queue heads and, while the batch is not empty, schedules the next step
//   tpot(running) after this one.
//   A consumer sees token 0 at firstToken and token i >= 1 once generated > i; done once the
//   sequence finished.
//
// Times are nanoseconds on the caller's clock. Thread safety: thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "sim/pool_timing.hpp"

namespace holdback_examples {

class StepEngine {
 public:
  using Nanos = std::int64_t;

  struct Options {
    holdback::sim::PoolTiming timing;
    int slots = 8;
    std::int64_t kvCapacityTokens = 16384;
  };

  // One sequence; the caller owns it and keeps it alive until it is done or removed.
  struct Sequence {
    std::int64_t input = 1;
    std::int64_t output = 1;
    // Set by the engine.
    bool running = false;
    bool done = false;
    std::int64_t generated = 0;
    Nanos admitted = -1;
    Nanos firstToken = -1;
    Nanos finished = -1;
    void* user = nullptr;  // the caller's (e.g. who to wake)
  };

  explicit StepEngine(Options options) : options_(options) {}

  // Appends `s` to the queue at `now` and admits what fits; the sequences admitted are appended
  // to `changed`.
  void enqueue(Sequence& s, Nanos now, std::vector<Sequence*>& changed);
  // When the next decode step is due; nullopt while the batch is empty.
  [[nodiscard]] std::optional<Nanos> nextStep() const { return next_step_; }
  // Runs the step due at `at` (= *nextStep()); every sequence that got a token, finished or was
  // admitted is appended to `changed`.
  void step(Nanos at, std::vector<Sequence*>& changed);
  // `s` leaves the queue or the batch at `now` (its client went away) and frees its KV; the
  // sequences admitted into its place are appended to `changed`. No-op once it is done.
  void remove(Sequence& s, Nanos now, std::vector<Sequence*>& changed);

  [[nodiscard]] std::size_t waiting() const { return queue_.size(); }
  [[nodiscard]] std::size_t running() const { return running_.size(); }
  [[nodiscard]] std::int64_t kvInUse() const { return kv_in_use_; }
  [[nodiscard]] const Options& options() const { return options_; }

  // The nanoseconds of a duration in milliseconds, rounded as the simulator rounds.
  [[nodiscard]] static Nanos fromMs(double ms);

 private:
  void admitHeads(Nanos now, std::vector<Sequence*>& changed);

  const Options options_;
  std::deque<Sequence*> queue_;
  std::vector<Sequence*> running_;
  std::int64_t kv_in_use_ = 0;
  std::optional<Nanos> next_step_;
};

}  // namespace holdback_examples
