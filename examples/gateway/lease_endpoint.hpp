// The endpoint a dispatched request goes to, reported on its lease.
//
//   pickForLease(pool, lease, detector, now, kvTokens)
//       Pool::pick, then lease.setEndpoint(position): the position the pick answered, on the
//       list the controller reads the pool from (the Pool is its EndpointSource, in the same
//       order). In-flight eviction's reserve restoration then revokes on the endpoint where a
//       protected request waits or would fit after one revocation
//       (include/holdback/flow/eviction.hpp, "Restoration per endpoint"), instead of choosing
//       pool-wide. Call it from the outcome callback of a dispatched request with
//       controller.ticket(completion.id): its lease exists by then, and the callback may call the
//       controller (no library lock is held).
//
// `Lease` is holdback::Ticket (a test passes a recorder around one).
//
// Thread safety: as Pool::pick and Ticket::setEndpoint (both safe from any thread).
#pragma once

#include <cstdint>
#include <optional>

#include "holdback/flow/flow_controller.hpp"
#include "pool.hpp"

namespace holdback::gateway {

template <class Lease>
std::optional<Pool::Dispatch> pickForLease(Pool& pool, Lease&& lease,
                                           const SaturationDetector& detector, TimePoint now,
                                           std::int64_t kvTokens, Priority priority = 0) {
  std::optional<Pool::Dispatch> dispatch = pool.pick(detector, now, kvTokens, priority);
  if (dispatch) (void)lease.setEndpoint(dispatch->endpoint);
  return dispatch;
}

}  // namespace holdback::gateway
