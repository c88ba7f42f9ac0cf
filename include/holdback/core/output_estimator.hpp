// OutputEstimator: the output tokens a request will generate, learned from completed requests,
// for requests that declare no limit (no `max_tokens`).
//
// A request's KV footprint (FlowRequest::kvTokens, holdback/core/capacity.hpp) is its input plus
// the output it will generate. A request with `max_tokens` declares an upper bound; one without
// declares nothing, and a fixed guess (the completions API's default of 16) undersizes the reserve
// whenever a band's answers are long. The estimator learns, per key (a priority band, or a host's
// own flow or model key), a high quantile of the output tokens of completed requests and returns
// it as the expected output of the next request of that key.
//
// The algorithm
//   Per key, a streaming quantile by stochastic approximation (the "frugal" estimator): after
//   each completion x (tokens),
//       m <- m + a (x - m)                                  (EWMA mean, the step's scale)
//       s  = max(m, |q - m|, 1)                             (the step's scale)
//       q <- q + a tau s          when x > q
//       q <- q - a (1 - tau) s    when x < q
//   q settles where P(x > q) = 1 - tau, i.e. at the tau-quantile (default tau 0.9: the reserve is
//   sized so that nine of ten requests fit in what was counted for them). The step depends on
//   the state only, not on x, so a single huge sample moves q by one step; |q - m| in the scale
//   lets q come down from far above the mean (after answers became shorter) within a few
//   hundred completions instead of thousands. The first sample sets m = q = x. Before
//   `minSamples` completions the estimate is max(q, fallbackTokens), so a cold key never declares
//   less than the fallback.
//
//   estimate(key) = fallbackTokens                         no completions recorded for the key
//                 = max(q, fallbackTokens)                 fewer than minSamples
//                 = max(q, 1)                              after that
//   rounded up to a whole token and at most maxTokens.
//
// Bad input: record() ignores NaN, infinite and negative counts (they leave the state unchanged
// and count in ignored()); a finite count above maxTokens is recorded as maxTokens. Keys beyond
// the first kMaxKeys distinct ones are not learned (estimate() returns fallbackTokens for them;
// record() counts them in ignored()).
//
// Thread safety: thread-safe. record() takes one small mutex (a few arithmetic operations under
// it; a new key is added under it too); estimate() and samples() never lock: they read atomics.
// Nothing allocates after create(), and nothing throws.
#pragma once

#include "holdback/abi.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "holdback/core/diagnostics.hpp"
#include "holdback/core/text.hpp"
#include "holdback/core/thread_annotations.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct OutputEstimatorOptions {
  // The quantile learned, in (0, 1): 0.9 = the output nine of ten completions stay within.
  double quantile = 0.9;
  // The learning rate a, in (0, 1]: the estimate rises to longer answers within about 1 / a
  // completions and falls to shorter ones within about 1 / (a (1 - quantile)).
  double learningRate = 0.05;
  // The expected output of a key with no (or too few) completions, >= 1 (16: the completions
  // API's default max_tokens).
  double fallbackTokens = 16.0;
  // Completions before the learned value may fall below fallbackTokens, >= 0.
  std::uint32_t minSamples = 8;
  // The largest output recorded or returned (a larger count is recorded as this), >= 1.
  double maxTokens = 1'000'000.0;
};

class OutputEstimator {
 public:
  // Keys learned at most (distinct keys beyond are not learned; see the file comment).
  static constexpr std::size_t kMaxKeys = 64;

  // Validates the options (every problem, each with its field name) and builds the estimator.
  static Result<std::unique_ptr<OutputEstimator>> create(OutputEstimatorOptions options = {}) {
    Diagnostics d;
    const auto bad = [&](const char* field, double v, const char* allowed) {
      d.error(std::string("/") + field, formatNumber(v) + " " + allowed);
    };
    if (!(options.quantile > 0.0 && options.quantile < 1.0)) {
      bad("quantile", options.quantile, "is outside (0.0, 1.0)");
    }
    if (!(options.learningRate > 0.0 && options.learningRate <= 1.0)) {
      bad("learningRate", options.learningRate, "is outside (0.0, 1.0]");
    }
    if (!(options.maxTokens >= 1.0 && std::isfinite(options.maxTokens))) {
      bad("maxTokens", options.maxTokens, "must be a finite number >= 1");
    }
    if (!(options.fallbackTokens >= 1.0 && options.fallbackTokens <= options.maxTokens)) {
      bad("fallbackTokens", options.fallbackTokens, "must be in [1, maxTokens]");
    }
    if (d.hasErrors()) return Result<std::unique_ptr<OutputEstimator>>::failure(std::move(d));
    return Result<std::unique_ptr<OutputEstimator>>(
        std::unique_ptr<OutputEstimator>(new OutputEstimator(options)), std::move(d));
  }

  // Learns one completion of `key` that generated `outputTokens` (see the file comment for bad
  // input). Takes the estimator's mutex.
  void record(std::int64_t key, double outputTokens) noexcept {
    if (!(outputTokens >= 0.0) || std::isinf(outputTokens)) {
      ignored_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const double x = std::min(outputTokens, options_.maxTokens);
    std::lock_guard<std::mutex> lock(mu_);
    Slot* slot = find(key);
    if (slot == nullptr) {
      const std::size_t n = used_.load(std::memory_order_relaxed);
      if (n == kMaxKeys) {
        ignored_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      slot = &slots_[n];
      slot->key.store(key, std::memory_order_relaxed);
      used_.store(n + 1, std::memory_order_release);  // the key is visible with its slot
    }
    const std::uint64_t count = slot->samples.load(std::memory_order_relaxed);
    double m = x;
    double q = x;
    if (count > 0) {
      const double a = options_.learningRate;
      m = slot->mean.load(std::memory_order_relaxed);
      q = slot->quantile.load(std::memory_order_relaxed);
      m += a * (x - m);
      const double step = a * std::max({m, std::abs(q - m), 1.0});
      if (x > q) q += step * options_.quantile;
      if (x < q) q -= step * (1.0 - options_.quantile);
      q = std::clamp(q, 0.0, options_.maxTokens);
    }
    slot->mean.store(m, std::memory_order_relaxed);
    slot->quantile.store(q, std::memory_order_relaxed);
    slot->samples.store(count + 1, std::memory_order_relaxed);
  }

  // The expected output tokens of the next request of `key` (see the file comment): a whole
  // number in [1, maxTokens]. Lock-free.
  [[nodiscard]] double estimate(std::int64_t key) const noexcept {
    const Slot* slot = find(key);
    const std::uint64_t count = slot ? slot->samples.load(std::memory_order_relaxed) : 0;
    if (count == 0) return std::ceil(options_.fallbackTokens);
    double q = slot->quantile.load(std::memory_order_relaxed);
    q = std::max(q, count < options_.minSamples ? options_.fallbackTokens : 1.0);
    return std::min(std::ceil(q), options_.maxTokens);
  }

  // Completions learned for `key`. Lock-free.
  [[nodiscard]] std::uint64_t samples(std::int64_t key) const noexcept {
    const Slot* slot = find(key);
    return slot ? slot->samples.load(std::memory_order_relaxed) : 0;
  }
  // Counts record() ignored: bad values and keys beyond kMaxKeys. Lock-free.
  [[nodiscard]] std::uint64_t ignored() const noexcept {
    return ignored_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] const OutputEstimatorOptions& options() const noexcept { return options_; }

 private:
  explicit OutputEstimator(OutputEstimatorOptions options) : options_(options) {}

  struct Slot {
    std::atomic<std::int64_t> key{0};
    std::atomic<std::uint64_t> samples{0};
    std::atomic<double> mean{0.0};
    std::atomic<double> quantile{0.0};
  };
  // The slot of `key` among the used ones; nullptr when not learned. O(kMaxKeys).
  [[nodiscard]] const Slot* find(std::int64_t key) const noexcept {
    const std::size_t n = used_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i) {
      if (slots_[i].key.load(std::memory_order_relaxed) == key) return &slots_[i];
    }
    return nullptr;
  }
  [[nodiscard]] Slot* find(std::int64_t key) noexcept {
    return const_cast<Slot*>(static_cast<const OutputEstimator*>(this)->find(key));
  }

  const OutputEstimatorOptions options_;
  std::mutex mu_;  // serializes record(): one writer per slot at a time
  std::array<Slot, kMaxKeys> slots_{};
  std::atomic<std::size_t> used_{0};
  std::atomic<std::uint64_t> ignored_{0};
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
