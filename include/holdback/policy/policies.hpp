// The built-in usage limit policies.
//
//   static-usage-limit-policy       one threshold for every band (the default policy; binary
//                                   backpressure when threshold = 1.0)
//   priority-holdback-policy        progressive holdback: stepwise-spread, linear-proportional,
//                                   sigmoid-smoothed (rank or value domain) and static map
//   soft-reflective-ceiling-policy  saturation-dependent duty cycle for gated bands
//
// Each policy is created from a plain options struct (designated initializers) through create(),
// which validates the options and returns every problem at once; or from JSON through the policy
// registry (config/policy_config.hpp). Constructors are private: an invalid policy cannot exist.
//
// All strategies are O(N) in the number of priorities (static: O(N log M) for M listed
// priorities), allocate nothing and never throw. Arithmetic on priorities is done in double, so
// INT_MIN/INT_MAX cannot overflow. See docs/guide/policies.md for tables and guidance.
#pragma once

#include "holdback/abi.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/core/diagnostics.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// static-usage-limit-policy

struct StaticUsageLimitOptions {
  // The ceiling written for every band; in (0, 1]. 1.0 = binary backpressure at full saturation.
  double threshold = 1.0;
};

// Writes `threshold` into every element, regardless of saturation and priorities.
// Thread safety: thread-safe (immutable after creation).
class HOLDBACK_API StaticUsageLimitPolicy final : public UsageLimitPolicy {
 public:
  static constexpr std::string_view kType = "static-usage-limit-policy";

  static Result<std::unique_ptr<StaticUsageLimitPolicy>> create(
      StaticUsageLimitOptions options = {}, std::string name = std::string(kType));
  // Appends one error per invalid field; `path` is the JSON pointer of the parameters object.
  static void validate(const StaticUsageLimitOptions& options, const std::string& path,
                       Diagnostics& diagnostics);

  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] const StaticUsageLimitOptions& options() const noexcept { return options_; }

 protected:
  void compute(double /*saturation*/, std::span<const Priority> /*priorities*/,
               std::span<double> ceilings) noexcept override {
    for (double& c : ceilings) c = options_.threshold;
  }

 private:
  StaticUsageLimitPolicy(StaticUsageLimitOptions options, std::string name)
      : UsageLimitPolicy(std::move(name)), options_(options) {
    uniform_ceiling_ = options_.threshold;  // create() validated it into (0, 1]
  }
  StaticUsageLimitOptions options_;
};

// ---------------------------------------------------------------------------------------------
// priority-holdback-policy

enum class HoldbackStrategy {
  kStepwiseSpread,      // rank:  c_i = cMax - i (cMax - cMin) / (N - 1)
  kLinearProportional,  // value: c_i = cMin + r_i (cMax - cMin), r_i = (p_i - pMin) / (pMax - pMin)
  kSigmoidSmoothed,  // c_i = cMin + S(x_i) (cMax - cMin), x_i = r_i (value) or 1 - i/(N-1) (rank)
  kStatic,           // c_i = ceilings[p_i], with a documented fallback for unlisted priorities
};

enum class SigmoidDomain { kRank, kValue };

[[nodiscard]] HOLDBACK_API std::string_view toString(HoldbackStrategy strategy) noexcept;
[[nodiscard]] HOLDBACK_API std::string_view toString(SigmoidDomain domain) noexcept;

struct StaticCeiling {
  Priority priority = 0;
  double ceiling = 1.0;
};

struct PriorityHoldbackOptions {
  HoldbackStrategy strategy = HoldbackStrategy::kStepwiseSpread;
  // Required for stepwise/linear/sigmoid, in [0, 1); must be < maxCeiling. Unused by static.
  std::optional<double> minCeiling;
  // In (0, 1]. The ceiling of the top band, and the ceiling when only one priority is present.
  double maxCeiling = 1.0;
  // Sigmoid only: steepness k in (0, 100] and midpoint x0 in [0, 1].
  double sigmoidSteepness = 8.0;
  double sigmoidMidpoint = 0.5;
  SigmoidDomain sigmoidDomain = SigmoidDomain::kRank;
  // Static only: required, non-empty, each ceiling in [0, 1], unique priorities (any order), and
  // non-increasing from the highest priority to the lowest (the boot-time inversion check).
  std::vector<StaticCeiling> ceilings;
  // Static only: the ceiling of an unlisted priority, in [0, 1]. Without it an unlisted priority
  // takes the ceiling of the nearest listed priority below it (or, below all of them, the lowest
  // listed ceiling).
  std::optional<double> defaultCeiling;
};

// Progressive holdback: lower priorities get lower ceilings, so they stop dispatching first and
// capacity stays in reserve for higher ones. Saturation is ignored: ceilings depend only on the
// priority list. N = 0 writes nothing; N = 1 writes maxCeiling for every strategy (work
// conservation). Priorities are expected highest first and unique; other input still yields
// finite, bounded, non-increasing ceilings (value-domain strategies use the true minimum and
// maximum of the list; rank strategies use list positions).
// Ceilings from a table or a memo: a rank-domain strategy reads a row computed per list length at
// creation (N <= 64); the value-domain and static strategies keep the last priority list they
// computed (N <= 64) and its ceilings, and return those when called with the same list again (a
// flow controller passes the same band list every cycle until its bands change). Either gives
// exactly the ceilings the computation would.
// Thread safety: thread-safe (the options and the table are immutable after creation; the memo is
// a sequence lock over atomics, rewritten by at most one caller at a time).
class HOLDBACK_API PriorityHoldbackPolicy final : public UsageLimitPolicy {
 public:
  static constexpr std::string_view kType = "priority-holdback-policy";

  static Result<std::unique_ptr<PriorityHoldbackPolicy>> create(
      PriorityHoldbackOptions options, std::string name = std::string(kType));
  // Appends one diagnostic per problem (errors; a warning for a static defaultCeiling above the
  // lowest listed ceiling, which the sweep would propagate upward). `path` is the JSON pointer of
  // the parameters object; static entries are reported at `path`/ceilings/<priority>.
  static void validate(const PriorityHoldbackOptions& options, const std::string& path,
                       Diagnostics& diagnostics);

  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] const PriorityHoldbackOptions& options() const noexcept { return options_; }

 protected:
  void compute(double saturation, std::span<const Priority> priorities,
               std::span<double> ceilings) noexcept override;

 private:
  PriorityHoldbackPolicy(PriorityHoldbackOptions options, std::string name);

  static double logistic(double x, double k, double x0) noexcept {
    return 1.0 / (1.0 + std::exp(-k * (x - x0)));
  }
  // f(i) for i = 0..n-1, with a 32-bit i when n fits (see compute()).
  template <class F>
  static void forEachRank(std::size_t n, F&& f) noexcept {
    if (n <= static_cast<std::size_t>(INT32_MAX)) {
      for (std::int32_t i = 0; i < static_cast<std::int32_t>(n); ++i) f(i);
    } else {
      for (std::size_t i = 0; i < n; ++i) f(i);
    }
  }
  void computeSwept(double saturation, std::span<const Priority> priorities,
                    std::span<double> ceilings) noexcept override;
  [[nodiscard]] bool memoLookup(std::span<const Priority> priorities,
                                std::span<double> ceilings) const noexcept;
  void memoStore(std::span<const Priority> priorities, std::span<const double> ceilings) noexcept;
  void computeStatic(std::span<const Priority> priorities,
                     std::span<double> ceilings) const noexcept;
  [[nodiscard]] std::size_t staticIndex(Priority p) const noexcept;

  PriorityHoldbackOptions options_;  // static entries sorted highest priority first
  double c_min_ = 0.0;
  double c_max_ = 1.0;
  double sigmoid_lo_ = 0.0;    // sigma(0)
  double sigmoid_span_ = 1.0;  // sigma(1) - sigma(0)
  // Rank-domain strategies (stepwise, sigmoid over ranks) only: for every n in
  // [2, kRankTableMax], the n ceilings computeLimit() returns for n priorities (computed and
  // swept once, at creation), at rankTableOffset(n). About 16 KB.
  static constexpr std::size_t kRankTableMax = 64;
  static constexpr std::size_t rankTableOffset(std::size_t n) noexcept {
    return n * (n - 1) / 2 - 1;
  }
  std::vector<double> rank_table_;
  // Value-domain and static strategies only: the last list of at most kMemoMax priorities that
  // computeSwept() computed, and its swept ceilings. `version` is odd while a caller rewrites the
  // entry; a reader copies it and keeps the copy only if `version` did not move meanwhile. `size`
  // 0 means empty. The priorities are stored two to a word (the bytes of priorities 2j and 2j + 1;
  // an odd list's last word has a zero second half), so the comparison loads half as many
  // words. The entry's stores are releases and its loads acquires (plain moves on x86-64).
  static constexpr std::size_t kMemoMax = 64;
  struct Memo {
    std::atomic<std::uint64_t> version{0};
    std::atomic<std::size_t> size{0};
    std::atomic<std::uint64_t> key[kMemoMax / 2];
    std::atomic<double> value[kMemoMax];
  };
  static std::uint64_t keyWord(const Priority* p, std::size_t left) noexcept {
    std::uint64_t w = 0;
    std::memcpy(&w, p, left >= 2 ? 8 : 4);
    return w;
  }
  void computeAndRemember(double saturation, std::span<const Priority> priorities,
                          std::span<double> ceilings) noexcept;
  Memo memo_;
  // Static only, M + 1 entries (the last a sentinel): the listed priorities highest first, their
  // ceilings, and the ceiling of an unlisted priority whose first listed priority below it is at
  // that position (defaultCeiling, else that entry's ceiling, else the lowest listed ceiling).
  std::vector<std::int64_t> static_key_;
  std::vector<double> static_hit_;
  std::vector<double> static_miss_;
};

// The strategies keep the reference's evaluation order, so every ceiling is bit-identical to the
// one-element-at-a-time form (tests/policy/policy_fast_path_test.cpp). Rank positions are
// counted in 32 bits where they fit (int32 -> double converts two at a time in SSE2, so the loop
// vectorizes; size_t -> double does not); the sigmoid runs in passes so that the exp() pass is a
// bare loop.
inline void PriorityHoldbackPolicy::compute(double /*saturation*/,
                                            std::span<const Priority> priorities,
                                            std::span<double> ceilings) noexcept {
  const std::size_t n = priorities.size();
  if (n == 1) {
    ceilings[0] = c_max_;
    return;
  }
  if (n <= kRankTableMax && !rank_table_.empty()) {  // rank domain: depends on n alone
    const double* row = rank_table_.data() + rankTableOffset(n);
    for (std::size_t i = 0; i < n; ++i) ceilings[i] = row[i];
    return;
  }
  const double spread = c_max_ - c_min_;
  const double last = static_cast<double>(n - 1);
  double* const out = ceilings.data();
  const Priority* const in = priorities.data();

  // Value-domain strategies need the observed range [pMin, pMax] (exact in int32).
  double p_min = 0.0;
  double range = 0.0;
  const bool value_domain = options_.strategy == HoldbackStrategy::kLinearProportional ||
                            (options_.strategy == HoldbackStrategy::kSigmoidSmoothed &&
                             options_.sigmoidDomain == SigmoidDomain::kValue);
  if (value_domain) {
    Priority lo = in[0];
    Priority hi = in[0];
    for (std::size_t i = 1; i < n; ++i) {
      lo = in[i] < lo ? in[i] : lo;
      hi = in[i] > hi ? in[i] : hi;
    }
    if (lo == hi) {  // all equal: no differentiation, work-conserving
      for (std::size_t i = 0; i < n; ++i) out[i] = c_max_;
      return;
    }
    p_min = static_cast<double>(lo);
    range = static_cast<double>(hi) - p_min;
  }

  switch (options_.strategy) {
    case HoldbackStrategy::kStepwiseSpread:
      forEachRank(n, [&](auto i) { out[i] = c_max_ - static_cast<double>(i) * spread / last; });
      break;
    case HoldbackStrategy::kLinearProportional:
      for (std::size_t i = 0; i < n; ++i) {
        const double r = (static_cast<double>(in[i]) - p_min) / range;
        out[i] = c_min_ + r * spread;
      }
      break;
    case HoldbackStrategy::kSigmoidSmoothed: {
      // x_i, then the logistic 1 / (1 + exp(-k (x - x0))), then S(x) = (sigma(x) - sigma(0)) /
      // (sigma(1) - sigma(0)); S(x) = x when that span underflows (k -> 0).
      if (value_domain) {
        for (std::size_t i = 0; i < n; ++i) out[i] = (static_cast<double>(in[i]) - p_min) / range;
      } else {
        forEachRank(n, [&](auto i) { out[i] = 1.0 - static_cast<double>(i) / last; });
      }
      if (!(sigmoid_span_ > 0.0)) {
        for (std::size_t i = 0; i < n; ++i) out[i] = c_min_ + out[i] * spread;
        break;
      }
      const double k = options_.sigmoidSteepness;
      const double x0 = options_.sigmoidMidpoint;
      for (std::size_t i = 0; i < n; ++i) out[i] = std::exp(-k * (out[i] - x0));
      for (std::size_t i = 0; i < n; ++i) {
        out[i] = c_min_ + ((1.0 / (1.0 + out[i]) - sigmoid_lo_) / sigmoid_span_) * spread;
      }
      break;
    }
    case HoldbackStrategy::kStatic:
      computeStatic(priorities, ceilings);
      break;
  }
}

// The static map. Priorities usually arrive highest first, as the entries are sorted, so the
// search resumes where the previous one ended (a merge walk, O(N + M), over a sentinel-terminated
// copy of the entries' priorities); an out-of-order priority restarts with a binary search. The
// ceiling of a miss at each position is precomputed (static_miss_), so each element is one
// compare and one select after the walk.
inline void PriorityHoldbackPolicy::computeSwept(double saturation,
                                                 std::span<const Priority> priorities,
                                                 std::span<double> ceilings) noexcept {
  const std::size_t n = priorities.size();
  if (n == 1) {  // maxCeiling, validated into (0, 1]: the sweep would be the identity
    ceilings[0] = c_max_;
    return;
  }
  if (n <= kRankTableMax && !rank_table_.empty()) {  // rows swept at creation
    const double* row = rank_table_.data() + rankTableOffset(n);
    for (std::size_t i = 0; i < n; ++i) ceilings[i] = row[i];
    return;
  }
  if (n <= kMemoMax && memoLookup(priorities, ceilings)) return;
  computeAndRemember(saturation, priorities, ceilings);
}

// Out of line, so that the table and memo paths above need no saved registers.
[[gnu::noinline]] inline void PriorityHoldbackPolicy::computeAndRemember(
    double saturation, std::span<const Priority> priorities, std::span<double> ceilings) noexcept {
  compute(saturation, priorities, ceilings);
  monotonize(ceilings);
  if (priorities.size() <= kMemoMax && rank_table_.empty()) memoStore(priorities, ceilings);
}

inline bool PriorityHoldbackPolicy::memoLookup(std::span<const Priority> priorities,
                                               std::span<double> ceilings) const noexcept {
  const std::size_t n = priorities.size();
  const std::uint64_t v = memo_.version.load(std::memory_order_acquire);
  if ((v & 1U) != 0 || memo_.size.load(std::memory_order_acquire) != n) return false;
  const Priority* const p = priorities.data();
  std::uint64_t diff = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {  // unrolled: each load stands alone, nothing to vectorize
    diff |= (memo_.key[i / 2].load(std::memory_order_acquire) ^ keyWord(p + i, 2)) |
            (memo_.key[i / 2 + 1].load(std::memory_order_acquire) ^ keyWord(p + i + 2, 2));
  }
  for (; i < n; i += 2) {
    diff |= memo_.key[i / 2].load(std::memory_order_acquire) ^ keyWord(p + i, n - i);
  }
  if (diff != 0) return false;
  double* const c = ceilings.data();
  for (i = 0; i + 4 <= n; i += 4) {
    c[i] = memo_.value[i].load(std::memory_order_acquire);
    c[i + 1] = memo_.value[i + 1].load(std::memory_order_acquire);
    c[i + 2] = memo_.value[i + 2].load(std::memory_order_acquire);
    c[i + 3] = memo_.value[i + 3].load(std::memory_order_acquire);
  }
  for (; i < n; ++i) c[i] = memo_.value[i].load(std::memory_order_acquire);
  // The loads above are acquires (plain loads on x86-64), so this one cannot move before them,
  // and a value written by a rewrite shows this load that rewrite's odd version (no fences:
  // ThreadSanitizer does not model them).
  return memo_.version.load(std::memory_order_relaxed) == v;  // else a writer overlapped the copy
}

inline void PriorityHoldbackPolicy::memoStore(std::span<const Priority> priorities,
                                              std::span<const double> ceilings) noexcept {
  std::uint64_t v = memo_.version.load(std::memory_order_relaxed);
  // Another caller is rewriting it: leave it to that one.
  if ((v & 1U) != 0 ||
      !memo_.version.compare_exchange_strong(v, v + 1, std::memory_order_relaxed)) {
    return;
  }
  const std::size_t n = priorities.size();
  memo_.size.store(n, std::memory_order_release);
  for (std::size_t i = 0; i < n; i += 2) {
    memo_.key[i / 2].store(keyWord(priorities.data() + i, n - i), std::memory_order_release);
  }
  for (std::size_t i = 0; i < n; ++i) memo_.value[i].store(ceilings[i], std::memory_order_release);
  memo_.version.store(v + 2, std::memory_order_release);
}

inline void PriorityHoldbackPolicy::computeStatic(std::span<const Priority> priorities,
                                                  std::span<double> ceilings) const noexcept {
  const std::int64_t* const keys = static_key_.data();
  const double* const hit = static_hit_.data();
  const double* const miss = static_miss_.data();
  std::size_t at = 0;
  std::int64_t previous = INT64_MAX;
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    const std::int64_t p = priorities[i];
    if (p > previous) at = staticIndex(priorities[i]);
    while (keys[at] > p) ++at;  // the sentinel (INT64_MIN) stops it
    previous = p;
    ceilings[i] = keys[at] == p ? hit[at] : miss[at];
  }
}

// The first entry whose priority is <= p (entries sorted highest first); M when none is.
inline std::size_t PriorityHoldbackPolicy::staticIndex(Priority p) const noexcept {
  std::size_t lo = 0;
  std::size_t hi = static_key_.size() - 1;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (static_key_[mid] > p) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------
// soft-reflective-ceiling-policy

// Gated bands get a duty cycle instead of a hard stop. Band i's reflective ceiling is
// r_i = 1 - i s / (N - 1); a band with s < r_i is open (1.0); otherwise it is closed (0.0) when
// s >= 1, and in the alternating regime 0.5 <= s < 1 every gated band opens together on one call
// in `period = max(1, round(s / (1 - s + 1e-9)))` (half away from zero), counted by one shared
// tick, so the dispatch share of gated bands is about (1 - s) / s. Band 0 always reads 1.0; a
// single band reads 1.0. Outputs are exactly 0.0 or 1.0. NaN saturation reads as 1.0 (all bands
// but the first closed) and +inf as overload.
// Thread safety: thread-safe (the tick is a relaxed atomic counter; concurrent callers share it).
class HOLDBACK_API SoftReflectiveCeilingPolicy final : public UsageLimitPolicy {
 public:
  static constexpr std::string_view kType = "soft-reflective-ceiling-policy";

  static Result<std::unique_ptr<SoftReflectiveCeilingPolicy>> create(
      std::string name = std::string(kType));

  [[nodiscard]] std::string_view type() const noexcept override { return kType; }

  // The alternation period at saturation s in [0.5, 1): max(1, round(s / (1 - s + 1e-9))).
  [[nodiscard]] static std::uint64_t period(double s) noexcept {
    const double ratio = std::round(s / (1.0 - s + 1e-9));
    return ratio < 1.0 ? 1 : static_cast<std::uint64_t>(ratio);
  }
  // Calls so far that were in the alternating regime.
  [[nodiscard]] std::uint64_t ticks() const noexcept {
    return tick_.load(std::memory_order_relaxed);
  }

 protected:
  void compute(double s, std::span<const Priority> priorities,
               std::span<double> ceilings) noexcept override {
    const std::size_t n = priorities.size();
    ceilings[0] = 1.0;
    if (n == 1) return;
    bool open = false;
    if (s >= 1.0 - s && s < 1.0) {
      const std::uint64_t tick = tick_.fetch_add(1, std::memory_order_relaxed) + 1;
      open = tick % period(s) == 0;
    }
    const double last = static_cast<double>(n - 1);
    for (std::size_t i = 1; i < n; ++i) {
      const double reflective = 1.0 - static_cast<double>(i) * s / last;
      if (s < reflective) {
        ceilings[i] = 1.0;
      } else if (s >= 1.0) {
        ceilings[i] = 0.0;
      } else {
        ceilings[i] = open ? 1.0 : 0.0;
      }
    }
  }

 private:
  explicit SoftReflectiveCeilingPolicy(std::string name) : UsageLimitPolicy(std::move(name)) {}
  std::atomic<std::uint64_t> tick_{0};
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/policy/policies-inl.hpp"
#endif
