// The endpoint a dispatched request goes to, reported on its lease.
//
//   pickForLease(pool, controller, detector, id, now, kvTokens)
//       Pool::pick, then controller.setLeaseEndpoint(id, position): the position the pick
//       answered, on the list the controller reads the pool from (the Pool is its
//       EndpointSource, in the same order). In-flight eviction's reserve restoration then revokes
//       on the endpoint where a protected request waits or would fit after one revocation
//       (include/holdback/flow/eviction.hpp, "Restoration per endpoint"), instead of choosing
//       pool-wide. Call it from the outcome callback of a dispatched request: its lease exists
//       by then, and the callback may call the controller (no library lock is held).
//
// `Controller` is holdback::FlowController (a test passes a recorder around one).
//
// Thread safety: as Pool::pick and FlowController::setLeaseEndpoint (both thread-safe).
#pragma once

#include <cstdint>
#include <optional>

#include "holdback/flow/flow_controller.hpp"
#include "pool.hpp"

namespace holdback::gateway {

template <class Controller>
std::optional<Pool::Dispatch> pickForLease(Pool& pool, Controller& controller,
                                           const SaturationDetector& detector, RequestId id,
                                           TimePoint now, std::int64_t kvTokens) {
  std::optional<Pool::Dispatch> dispatch = pool.pick(detector, now, kvTokens);
  if (dispatch) (void)controller.setLeaseEndpoint(id, dispatch->endpoint);
  return dispatch;
}

}  // namespace holdback::gateway
