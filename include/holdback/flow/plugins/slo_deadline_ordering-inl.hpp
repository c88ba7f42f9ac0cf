// Implementation of holdback/flow/plugins/slo_deadline_ordering.hpp: compiled into libholdback by
// src/flow.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/flow/plugins/slo_deadline_ordering.hpp"

#include <charconv>
#include <cstdint>
#include <limits>
#include <memory>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE TimePoint
SloDeadlineOrderingPolicy::deadlineOf(const QueuedRequestView& r) noexcept {
  if (!r.ttftObjective || *r.ttftObjective < Duration::zero()) return TimePoint::max();
  if (r.receivedTime > TimePoint::max() - *r.ttftObjective) return TimePoint::max();
  return r.receivedTime + *r.ttftObjective;
}

HOLDBACK_INLINE bool SloDeadlineOrderingPolicy::less(const QueuedRequestView& a,
                                                     const QueuedRequestView& b) const noexcept {
  const TimePoint da = deadlineOf(a);
  const TimePoint db = deadlineOf(b);
  if (da != db) return da < db;
  return a.receivedTime < b.receivedTime;
}

HOLDBACK_INLINE std::optional<Duration> SloDeadlineOrderingPolicy::parseTtftHeader(
    std::string_view value) noexcept {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  // Go's ParseInt takes one leading sign; from_chars only '-', which is rejected as negative.
  if (value.size() > 1 && value.front() == '+' && value[1] != '-') value.remove_prefix(1);
  std::int64_t ms = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
  if (ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
  if (ms < 0 || ms > std::numeric_limits<std::int64_t>::max() / 1'000'000) return std::nullopt;
  return std::chrono::duration_cast<Duration>(std::chrono::milliseconds(ms));
}

HOLDBACK_INLINE std::optional<Duration> SloDeadlineOrderingPolicy::ttftFromHeaders(
    std::optional<std::string_view> header,
    std::optional<std::string_view> deprecatedHeader) noexcept {
  if (header) return parseTtftHeader(*header);
  if (deprecatedHeader) return parseTtftHeader(*deprecatedHeader);
  return std::nullopt;
}

HOLDBACK_INLINE std::shared_ptr<const OrderingPolicy> sloDeadlineOrdering() {
  static const auto instance = std::make_shared<const SloDeadlineOrderingPolicy>();
  return instance;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
