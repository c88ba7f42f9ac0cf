// Implementation of holdback/flow/replica_port.hpp: compiled into libholdback by src/flow.cpp,
// or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY). Each call goes
// straight to the controller core, if it is still alive.
#pragma once

#include "holdback/flow/replica_port.hpp"

#include "holdback/flow/detail/controller_core.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE ReplicaRestoreFigures ReplicaPort::restoreFigures() const noexcept {
  auto core = core_.lock();
  if (!core) return {};
  return core->replicaRestoreFigures();
}

HOLDBACK_INLINE void ReplicaPort::setShare(
    const std::optional<ReplicaShare>& share) const noexcept {
  if (auto core = core_.lock()) core->setReplicaShare(share);
}

HOLDBACK_INLINE void ReplicaPort::recordPeerArrival(Priority priority,
                                                    std::int64_t kvTokens) const noexcept {
  if (auto core = core_.lock()) core->recordPeerArrival(priority, kvTokens);
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
