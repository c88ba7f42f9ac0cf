// Flow-control outcomes: how every request handed to the FlowController ends, and what a gateway
// answers its client for each ending.
//
// Every request ends with exactly one Outcome (the QueueOutcome taxonomy of the Go reference's
// pkg/epp/flowcontrol/types/outcomes.go in llm-d-router, https://github.com/llm-d/llm-d-router,
// without the internal NotYetFinalized value): one success (kDispatched), three pre-queue
// rejections and four evictions of a queued request. The OutcomeCause says why a
// kRejectedOther/kEvictedOther happened (and repeats the obvious cause for the others), so that
// toHttp() can map it like the Go EPP's translateFlowControlOutcome:
//
//   outcome                                   HTTP  drop reason (x-...-request-dropped-reason)
//   kDispatched                               200   "" (proceed)
//   kRejectedCapacity                         429   rejected-saturated
//   kRejectedNoEndpoints, kEvictedNoEndpoints 503   rejected-no-endpoints
//   kEvictedTtl, pool empty at reply time     503   rejected-no-endpoints
//   kEvictedTtl, pool non-empty               429   rejected-ttl-expired
//   kEvictedCancelled                         503   rejected-context-cancelled
//   *Other with cause kNotRunning             503   rejected-shutting-down
//   *Other with cause kTtlExpired             as kEvictedTtl
//   *Other with cause kCancelled              as kEvictedCancelled
//   *Other with cause kTooLarge               413   rejected-too-large
//   any other *Other                          500   ""
//
// Thread safety: thread-safe (pure functions on values).
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

enum class QueueOutcome : std::uint8_t {
  kDispatched = 0,           // success: the host may send the request to the model servers
  kRejectedCapacity = 1,     // pre-queue: a global or band limit would be exceeded
  kRejectedNoEndpoints = 2,  // pre-queue: capacity exceeded while the pool has no endpoints
  kRejectedOther = 3,        // pre-queue: invalid request, or the controller is shutting down
  kEvictedTtl = 4,           // queued: the saturation-regime budget or the caller deadline ran out
  kEvictedNoEndpoints = 5,   // queued: the no-endpoint budget ran out while the pool was empty
  kEvictedCancelled = 6,     // queued: the host cancelled it (Ticket::cancel / cancel(id))
  kEvictedOther = 7,         // queued: removed for another reason (shutdown)
};
inline constexpr std::size_t kNumQueueOutcomes = 8;

inline constexpr std::array<QueueOutcome, kNumQueueOutcomes> kAllQueueOutcomes{
    QueueOutcome::kDispatched,          QueueOutcome::kRejectedCapacity,
    QueueOutcome::kRejectedNoEndpoints, QueueOutcome::kRejectedOther,
    QueueOutcome::kEvictedTtl,          QueueOutcome::kEvictedNoEndpoints,
    QueueOutcome::kEvictedCancelled,    QueueOutcome::kEvictedOther};

// Why an outcome happened.
enum class OutcomeCause : std::uint8_t {
  kNone = 0,         // kDispatched
  kQueueAtCapacity,  // kRejectedCapacity
  kNoEndpoints,      // kRejectedNoEndpoints, kEvictedNoEndpoints
  kTtlExpired,       // kEvictedTtl (budget or caller deadline)
  kCancelled,        // kEvictedCancelled
  kNotRunning,       // *Other: the controller is shutting down or shut down
  kInvalidRequest,   // kRejectedOther: e.g. an empty flow id
  // kRejectedOther / kEvictedOther: the request's KV footprint (FlowRequest::kvTokens) exceeds
  // the KV capacity of every endpoint of the pool (Endpoint::kvCapacityTokens, all known), so it
  // could never start (holdback's own outcome; the Go reference has no capacity model).
  kTooLarge,
};

struct Outcome {
  QueueOutcome kind = QueueOutcome::kRejectedOther;
  OutcomeCause cause = OutcomeCause::kNone;

  [[nodiscard]] constexpr bool dispatched() const noexcept {
    return kind == QueueOutcome::kDispatched;
  }
  [[nodiscard]] constexpr bool rejected() const noexcept {
    return kind == QueueOutcome::kRejectedCapacity || kind == QueueOutcome::kRejectedNoEndpoints ||
           kind == QueueOutcome::kRejectedOther;
  }
  [[nodiscard]] constexpr bool evicted() const noexcept { return !dispatched() && !rejected(); }
  friend constexpr bool operator==(const Outcome&, const Outcome&) = default;
};

// "Dispatched", "RejectedCapacity", ..., "EvictedOther"; "UnknownOutcome" for out-of-range values.
[[nodiscard]] HOLDBACK_API std::string_view toString(QueueOutcome outcome) noexcept;
// "none", "queue-at-capacity", "no-endpoints", "ttl-expired", "cancelled", "not-running",
// "invalid-request", "too-large".
[[nodiscard]] HOLDBACK_API std::string_view toString(OutcomeCause cause) noexcept;

struct HttpDisposition {
  // 200 for kDispatched (proceed), otherwise the status to answer the client with.
  int status = 500;
  // The drop-reason header value; empty when the reference sends none.
  std::string_view dropReason;
  [[nodiscard]] constexpr bool proceed() const noexcept { return status == 200; }
};

// The table in the file comment. `poolEmptyNow` is the host's probe of the pool at reply time
// (only consulted for TTL evictions).
[[nodiscard]] HOLDBACK_API HttpDisposition toHttp(Outcome outcome,
                                                  bool poolEmptyNow = false) noexcept;

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/outcome-inl.hpp"
#endif
