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
#include "replica_input.hpp"

namespace holdback::gateway {

// The wall clock less the controller's clock (holdback::Clock), in seconds, now.
[[nodiscard]] double wallMinusSteadySeconds();

// `f` as text, its dispatch times moved to the wall clock by `wallMinusSteady`. A figure that is
// not finite or is outside [0, ReplicaInputLimits::kMaxFigure] (victim lists: [0, 1]) is written
// as the nearest bound (0 for NaN), so that the other replicas take it.
[[nodiscard]] std::string formatRestoreFigures(const ReplicaRestoreFigures& f,
                                               double wallMinusSteady);

// Reads what formatRestoreFigures wrote (or the four figures alone) into `out`, the times moved
// back by `wallMinusSteady`. Strict: the text is rejected whole (false, `why` set, `out`
// unspecified) unless it is exactly that form, at most kMaxFiguresBytes, with every figure a
// finite number in [0, kMaxFigure] (victim lists in [0, 1]), at most kVictims victims and kHeads
// heads, head priorities 32-bit integers, and every time within [nowWall - kMaxTimeBehind,
// nowWall + kMaxTimeAhead] (`nowWall`: the wall clock now, in seconds). A peer's figures that
// pass are then summed by ReplicaRestoreFigures::operator+=.
bool parseRestoreFigures(std::string_view text, double wallMinusSteady, double nowWall,
                         ReplicaRestoreFigures& out, RejectReason& why);

}  // namespace holdback::gateway
