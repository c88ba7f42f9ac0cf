// Implementation of holdback/flow/outcome.hpp: compiled into libholdback by src/flow.cpp,
// or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/flow/outcome.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE std::string_view toString(QueueOutcome outcome) noexcept {
  switch (outcome) {
    case QueueOutcome::kDispatched:
      return "Dispatched";
    case QueueOutcome::kRejectedCapacity:
      return "RejectedCapacity";
    case QueueOutcome::kRejectedNoEndpoints:
      return "RejectedNoEndpoints";
    case QueueOutcome::kRejectedOther:
      return "RejectedOther";
    case QueueOutcome::kEvictedTtl:
      return "EvictedTTL";
    case QueueOutcome::kEvictedNoEndpoints:
      return "EvictedNoEndpoints";
    case QueueOutcome::kEvictedCancelled:
      return "EvictedCancelled";
    case QueueOutcome::kEvictedOther:
      return "EvictedOther";
  }
  return "UnknownOutcome";
}

HOLDBACK_INLINE std::string_view toString(OutcomeCause cause) noexcept {
  switch (cause) {
    case OutcomeCause::kNone:
      return "none";
    case OutcomeCause::kQueueAtCapacity:
      return "queue-at-capacity";
    case OutcomeCause::kNoEndpoints:
      return "no-endpoints";
    case OutcomeCause::kTtlExpired:
      return "ttl-expired";
    case OutcomeCause::kCancelled:
      return "cancelled";
    case OutcomeCause::kNotRunning:
      return "not-running";
    case OutcomeCause::kInvalidRequest:
      return "invalid-request";
    case OutcomeCause::kTooLarge:
      return "too-large";
  }
  return "unknown";
}

namespace detail {

HOLDBACK_INLINE HttpDisposition ttlExpired(bool poolEmptyNow) noexcept {
  if (poolEmptyNow) return {503, "rejected-no-endpoints"};
  return {429, "rejected-ttl-expired"};
}

HOLDBACK_INLINE HttpDisposition cancelled() noexcept {
  return {503, "rejected-context-cancelled"};
}

}  // namespace detail

HOLDBACK_INLINE HttpDisposition toHttp(Outcome outcome, bool poolEmptyNow) noexcept {
  switch (outcome.kind) {
    case QueueOutcome::kDispatched:
      return {200, ""};
    case QueueOutcome::kRejectedCapacity:
      return {429, "rejected-saturated"};
    case QueueOutcome::kRejectedNoEndpoints:
    case QueueOutcome::kEvictedNoEndpoints:
      return {503, "rejected-no-endpoints"};
    case QueueOutcome::kEvictedTtl:
      return detail::ttlExpired(poolEmptyNow);
    case QueueOutcome::kEvictedCancelled:
      return detail::cancelled();
    case QueueOutcome::kRejectedOther:
    case QueueOutcome::kEvictedOther:
      switch (outcome.cause) {
        case OutcomeCause::kNotRunning:
          return {503, "rejected-shutting-down"};
        case OutcomeCause::kTtlExpired:
          return detail::ttlExpired(poolEmptyNow);
        case OutcomeCause::kCancelled:
          return detail::cancelled();
        case OutcomeCause::kTooLarge:
          return {413, "rejected-too-large"};
        default:
          return {500, ""};
      }
  }
  return {500, ""};
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
