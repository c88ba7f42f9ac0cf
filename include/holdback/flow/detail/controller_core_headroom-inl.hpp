// ControllerCore's advisory readings for response headers (FlowController::bandHeadroom): kept
// apart from controller_core-inl.hpp, which holds the admission and dispatch paths.
#pragma once

#include "holdback/flow/detail/controller_core.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE std::optional<BandHeadroom> ControllerCore::bandHeadroom(
    Priority requested) const noexcept {
  MutexLock lock(mu_);
  const Band* band = table_.placementOf(requested);
  if (band == nullptr) return std::nullopt;
  BandHeadroom out;
  out.bandPriority = band->prio;
  out.maxRequests = band->maxRequests;
  const auto queued = static_cast<std::uint64_t>(band->queued_requests);
  out.queuedRequests = queued;
  out.requests = queued >= band->maxRequests ? 0 : band->maxRequests - queued;
  return out;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
