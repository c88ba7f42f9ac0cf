// The text form of a replica's restoration figures in the replica sync's Redis hash (field
// "@restore", replica_sync_redis.hpp), kept apart from the Redis client so that it is tested
// without a server:
//   "<arrivals/s> <completions/s> <revocations pending> <leases>"
//   [" <victim lists> <count> <dispatch time>..." [" <heads> <priority> <enqueue time>..."]]
// The optional tail carries the youngest victims' dispatch times (ReplicaRestoreFigures::
// victimDispatchTimes) in wall-clock seconds: replicas on several hosts compare them on the wall
// clock (kept in step by NTP), each converting from and to its controller's steady clock. The
// second tail carries the queue heads (ReplicaRestoreFigures::headPriorities, headEnqueueTimes),
// their enqueue times on the wall clock as well.
//
// Thread safety: free functions on their arguments only.
#pragma once

#include <string>
#include <string_view>

#include "holdback/core/replica_share.hpp"

namespace holdback::gateway {

// The wall clock less the controller's clock (holdback::Clock), in seconds, now.
[[nodiscard]] double wallMinusSteadySeconds();

// `f` as text, its dispatch times moved to the wall clock by `wallMinusSteady`.
[[nodiscard]] std::string formatRestoreFigures(const ReplicaRestoreFigures& f,
                                               double wallMinusSteady);

// Reads what formatRestoreFigures wrote (or the four figures alone, as replicas without victim
// lists publish) into `out`, the dispatch times moved back by `wallMinusSteady`. False when the
// four figures are malformed (`out` is then unspecified). Survives any text: a figure that is not
// finite and > 0 reads as 0, a list cut short keeps the times read, a count above
// ReplicaRestoreFigures::kVictims reads that many at most; the heads (read only after a complete
// list) keep the highest kHeads priorities.
bool parseRestoreFigures(std::string_view text, double wallMinusSteady, ReplicaRestoreFigures& out);

}  // namespace holdback::gateway
