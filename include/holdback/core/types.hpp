// The vocabulary every layer shares: priorities, request ids and the library's time types.
//
// Time is always passed in by the host (or a simulator), so any epoch works; steady_clock's
// time_point is only the carrier type. elapsed() is the one overflow-safe time difference of the
// library: hosts may use any epoch and TimePoint::max() is a legal deadline, so `to - from` can
// overflow an int64 count of nanoseconds.
//
// Thread safety: thread-safe (types and pure functions).
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <cstdint>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// A priority level. Larger is more important; negative priorities are "sheddable".
using Priority = std::int32_t;

// The controller's id of one enqueued request (unique per controller, never 0).
using RequestId = std::uint64_t;

// The library's clock types (see the file comment).
using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = std::chrono::nanoseconds;

// to - from, saturated at Duration::min() / Duration::max() instead of overflowing. A result of
// exactly Duration::min() or Duration::max() therefore means "does not fit" for callers that
// must tell (the utilization detector treats it as invalid telemetry).
[[nodiscard]] constexpr Duration elapsed(TimePoint from, TimePoint to) noexcept {
  using Rep = Duration::rep;
  const Rep a = to.time_since_epoch().count();
  const Rep b = from.time_since_epoch().count();
  Rep out = 0;
  if (__builtin_sub_overflow(a, b, &out)) return a > b ? Duration::max() : Duration::min();
  return Duration(out);
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
