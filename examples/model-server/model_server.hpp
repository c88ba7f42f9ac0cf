// The fake engine behind the HTTP front: the batch scheduler (batch_scheduler.hpp), the timing
// model, the counters and the /metrics text (vLLM's metric names).
//
// Timing: token i (0-based) of a sequence admitted at `start` is due at
// start + prefill-ms + i * token-ms; every sequence generates exactly max_tokens tokens. In pool
// mode the scheduler's decode steps time the tokens instead (batch_scheduler.hpp).
//
// Thread safety: thread-safe (the scheduler locks, the counters are atomics, the rest is const).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "batch_scheduler.hpp"
#include "openai_api.hpp"
#include "server_options.hpp"

namespace holdback_examples {

// vLLM's counters, cumulative since start.
struct Counters {
  std::atomic<std::uint64_t> success{0};
  std::atomic<std::uint64_t> promptTokens{0};
  std::atomic<std::uint64_t> generationTokens{0};
};

class ModelServer {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ModelServer(const ServerOptions& o);

  [[nodiscard]] const ServerOptions& options() const { return options_; }
  [[nodiscard]] BatchScheduler& scheduler() { return scheduler_; }
  [[nodiscard]] Counters& counters() { return counters_; }
  [[nodiscard]] const ReplyContext& replyContext() const { return context_; }

  // A fresh completion id: "chatcmpl-N" or "cmpl-N".
  [[nodiscard]] std::string nextId(Api api) {
    return (api == Api::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(++ids_);
  }

  // When token i of a sequence admitted at `start` is due.
  [[nodiscard]] Clock::time_point tokenTime(Clock::time_point start, std::int64_t i) const {
    return start + std::chrono::milliseconds(options_.prefillMs) +
           std::chrono::milliseconds(options_.tokenMs) * i;
  }

  // GET /metrics: the scheduler's gauges (or the --fake-* values) and the counters.
  [[nodiscard]] std::string metrics() const;

 private:
  const ServerOptions options_;
  BatchScheduler scheduler_;
  const ReplyContext context_;
  std::atomic<std::uint64_t> ids_{0};
  Counters counters_;
};

}  // namespace holdback_examples
