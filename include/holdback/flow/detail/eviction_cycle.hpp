// detail::EvictionCycle: what one eviction decision reads, built by the controller core for the
// call under its lock: its settings and components and the cycle's view. Internal.
//
// Thread safety: a view; valid only for the call it is built for.
#pragma once

#include <span>

#include "holdback/core/replica_share.hpp"
#include "holdback/core/types.hpp"
#include "holdback/flow/detail/band_table.hpp"
#include "holdback/flow/detail/demand_tracker.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/flow/detail/replica_coordinator.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/pool_pressure.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

struct EvictionCycle {
  const EvictionOptions& options;  // filter and order never null
  LeaseTable& leases;
  const DemandTracker& demand;       // its slots are the lease table's bands
  std::span<Band* const> bands;      // the policy's domain, highest first
  std::span<const double> ceilings;  // bands[i]'s ceiling this cycle
  TimePoint now;
  double saturation;
  // Where restoration reads each endpoint's room (restoration per endpoint); null: pool-wide.
  const PoolPressureSampler* sampler = nullptr;
  // The replica coordination (null: one gateway), and where restoration writes the figures
  // this replica publishes to the others (null: nowhere).
  const ReplicaCoordinator* replicas = nullptr;
  ReplicaRestoreFigures* publish = nullptr;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
