// slo-deadline-ordering-policy: orders a flow's requests by receivedTime + ttftObjective (the
// request's time-to-first-token SLO), earliest first (the Go reference's ordering/slodeadline
// plugin under pkg/epp/framework/plugins/flowcontrol/ in llm-d-router,
// https://github.com/llm-d/llm-d-router).
//
//   deadline(r) = r.receivedTime + *r.ttftObjective, saturating at TimePoint::max();
//                 no objective -> TimePoint::max() (after every request that has one).
//   less(a, b)  = deadline(a) < deadline(b); equal deadlines -> earlier receivedTime (then the
//                 controller's arrival sequence).
//
// The library takes the objective as FlowRequest::ttftObjective; a gateway reads it from the
// `x-llm-d-slo-ttft-ms` header (deprecated alias `x-slo-ttft-ms`; the new name wins when both are
// present) with parseTtftHeader, which clamps as upstream does: the value is trimmed of spaces
// and parsed as a base-10 int64 of milliseconds; empty, junk, negative, or above
// INT64_MAX / 1e6 ms (the nanosecond overflow guard, checked before scaling) -> no objective.
//
// Starvation: a request without an objective, or with a loose one, waits behind every tighter
// one of its flow (as upstream); pair the policy with a TTL.
//
// Thread safety: thread-safe (stateless).
#pragma once

#include "holdback/abi.hpp"

#include <optional>
#include <string_view>

#include "holdback/flow/fairness.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

class HOLDBACK_API SloDeadlineOrderingPolicy final : public OrderingPolicy {
 public:
  static constexpr std::string_view kType = "slo-deadline-ordering-policy";
  static constexpr std::string_view kHeader = "x-llm-d-slo-ttft-ms";
  static constexpr std::string_view kDeprecatedHeader = "x-slo-ttft-ms";

  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] bool less(const QueuedRequestView& a,
                          const QueuedRequestView& b) const noexcept override;
  [[nodiscard]] static TimePoint deadlineOf(const QueuedRequestView& r) noexcept;

  // One header value -> the objective, or nullopt (no objective) for anything upstream treats
  // as "maximum time". Never throws, never allocates.
  [[nodiscard]] static std::optional<Duration> parseTtftHeader(std::string_view value) noexcept;
  // The two headers (nullopt = absent): the new name wins when present, even if its value is
  // junk (then there is no objective), as upstream reads it.
  [[nodiscard]] static std::optional<Duration> ttftFromHeaders(
      std::optional<std::string_view> header,
      std::optional<std::string_view> deprecatedHeader) noexcept;
};

[[nodiscard]] HOLDBACK_API std::shared_ptr<const OrderingPolicy> sloDeadlineOrdering();

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/plugins/slo_deadline_ordering-inl.hpp"
#endif
