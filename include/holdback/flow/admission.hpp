// The admission and expiry rules of the flow controller, as pure functions: capacity (§3.6), the
// regime-aware TTL (§3.7) and how a request's own TTL and deadline resolve into its budget. The
// controller applies them under its lock; hosts and tests may call them directly.
//
// Thread safety: pure functions (thread-safe).
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <optional>

#include "holdback/core/types.hpp"
#include "holdback/detector/saturation_detector.hpp"
#include "holdback/flow/outcome.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// Capacity of one scope (global or band). A max of 0 means "no limit".
struct CapacityUsage {
  std::uint64_t maxBytes = 0;
  std::uint64_t usedBytes = 0;
  std::uint64_t maxRequests = 0;
  std::uint64_t usedRequests = 0;
};

// §3.6: admit iff neither limit of the global scope nor of the band would be exceeded by one more
// request of `itemBytes` (reaching a limit exactly is allowed; 0 = unlimited). `band == nullptr`
// (band absent) denies. Overflow-safe for any values.
[[nodiscard]] HOLDBACK_API bool hasCapacity(std::uint64_t itemBytes, const CapacityUsage& global,
                                            const CapacityUsage* band) noexcept;

// The pool regime: whether the endpoint source last returned an empty pool, and since when. The
// initial regime is {non-empty, since TimePoint::min()} ("always"; the reference uses Go's zero
// time, which precedes every real time: a host clock with any epoch must behave the same).
struct PoolRegime {
  bool empty = false;
  TimePoint since = TimePoint::min();
};

struct ExpiryVerdict {
  bool expired = false;
  // kEvictedTtl (non-empty regime) or kEvictedNoEndpoints (empty regime).
  QueueOutcome outcome = QueueOutcome::kEvictedTtl;
};

// §3.7: budget = effectiveTtl (non-empty regime) or noEndpointTtl (empty regime); a budget <= 0
// never expires; chargeFrom = max(enqueueTime, regime.since); expired iff now >= chargeFrom +
// budget (inclusive). Each regime change starts a fresh budget; a change before the request
// arrived does not extend it.
[[nodiscard]] HOLDBACK_API ExpiryVerdict isExpired(TimePoint enqueueTime, Duration effectiveTtl,
                                                   Duration noEndpointTtl, PoolRegime regime,
                                                   TimePoint now) noexcept;

// A request's saturation-regime budget at enqueue.
struct TtlResolution {
  // The caller's deadline had already passed at `now`: rejected kRejectedOther / kTtlExpired.
  bool deadlinePassed = false;
  // The effective TTL (>= 0; 0 = never expires in the saturation regime).
  Duration effectiveTtl{};
};

// ttl = the smallest of requestTtl, bandTtl and defaultTtl among those set and > 0 (a level can
// only shorten the budget, never extend it: upstream's scoped queue TTLs); none set = 0 (never
// expires). A deadline clamps it to the time remaining (and sets a budget when there is none); a
// deadline at or before `now` is deadlinePassed. Overflow-safe for any clock epoch
// (TimePoint::max() is a legal deadline). Does not allocate.
[[nodiscard]] HOLDBACK_API TtlResolution resolveRequestTtl(std::optional<Duration> requestTtl,
                                                           Duration bandTtl, Duration defaultTtl,
                                                           std::optional<TimePoint> deadline,
                                                           TimePoint now) noexcept;

// Why a queued request is already dead at `now`, if it is: its deadline passed (kEvictedTtl /
// kTtlExpired, whatever the regime) or isExpired() (kEvictedTtl / kTtlExpired or
// kEvictedNoEndpoints / kNoEndpoints).
[[nodiscard]] HOLDBACK_API std::optional<Outcome> deadOutcome(
    std::optional<TimePoint> deadline, TimePoint enqueueTime, Duration effectiveTtl,
    Duration noEndpointTtl, PoolRegime regime, TimePoint now) noexcept;

namespace detail {

// used + add > max, without overflow; max == 0 is "no limit".
[[nodiscard]] constexpr bool exceeds(std::uint64_t used, std::uint64_t add,
                                     std::uint64_t max) noexcept {
  if (max == 0) return false;
  return used > max || add > max - used;
}

// isExpired() and deadOutcome(), inline (the dispatch cycle checks every head it takes).
[[nodiscard]] constexpr ExpiryVerdict expiryOf(TimePoint enqueueTime, Duration effectiveTtl,
                                               Duration noEndpointTtl, const PoolRegime& regime,
                                               TimePoint now) noexcept {
  ExpiryVerdict verdict;
  verdict.outcome = regime.empty ? QueueOutcome::kEvictedNoEndpoints : QueueOutcome::kEvictedTtl;
  const Duration budget = regime.empty ? noEndpointTtl : effectiveTtl;
  if (budget <= Duration::zero()) return verdict;
  const TimePoint charge_from = enqueueTime < regime.since ? regime.since : enqueueTime;
  if (now < charge_from) return verdict;
  // now >= charge_from + budget, written so that it cannot overflow.
  verdict.expired = elapsed(charge_from, now) >= budget;
  return verdict;
}

[[nodiscard]] constexpr std::optional<Outcome> deadOutcomeAt(
    const std::optional<TimePoint>& deadline, TimePoint enqueueTime, Duration effectiveTtl,
    Duration noEndpointTtl, const PoolRegime& regime, TimePoint now) noexcept {
  if (deadline && now >= *deadline) {
    return Outcome{QueueOutcome::kEvictedTtl, OutcomeCause::kTtlExpired};
  }
  const ExpiryVerdict v = expiryOf(enqueueTime, effectiveTtl, noEndpointTtl, regime, now);
  if (!v.expired) return std::nullopt;
  if (v.outcome == QueueOutcome::kEvictedNoEndpoints) {
    return Outcome{QueueOutcome::kEvictedNoEndpoints, OutcomeCause::kNoEndpoints};
  }
  return Outcome{QueueOutcome::kEvictedTtl, OutcomeCause::kTtlExpired};
}

}  // namespace detail

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/admission-inl.hpp"
#endif
