// The reserver of --replica-mode reserve on Redis (replica_reserve.hpp says what it does for the
// gateway, replica_reserve_store.hpp what it does in Redis). One thread owns the connection and
// every call of this replica: bookings (the requests waiting, up to 32 per script call, in the
// order priority descending, enqueue time), releases (pipelined HDEL, read before any booking),
// and every --replica-sync-interval-ms the heartbeat with the re-assertion of the live bookings.
// Parked requests (refused everywhere) are retried on every release of this replica and every
// 2 ms, stopping at the first refusal.
//
// Failure is local: connect and command timeouts of redisTimeoutMs(interval); a failed call drops
// the connection and makes the reserver inactive (holdback_gateway_replica_reserve_active 0, one
// line on stderr): the replica keeps to its local 1/R share (a top-band request goes out on its
// pick at once, one of a band below while the replica's live dispatches are under
// fallbackShare(), replica_reserve.hpp; parked requests likewise), and the next tick reconnects:
// loads the scripts, re-asserts every live dispatch of this replica (those made meanwhile
// included), turns active again (one line on stderr) and books the requests still waiting. A
// replica whose heartbeat lapses (killed, partitioned, stalled past the lease) has its bookings
// ignored and deleted by the others' next bookings on those endpoints.
//
// Thread safety: ReplicaReserver's members are thread-safe; created and destroyed on one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gateway.hpp"
#include "replica_feed.hpp"
#include "replica_reserve.hpp"

namespace holdback::gateway {

// Starts the reserver for `gateway`'s pool (endpoints named by `endpointUrls`, in pool order).
// Built only with hiredis.
std::unique_ptr<ReplicaReserver> startReplicaReserver(const RedisStore& redis,
                                                      std::vector<std::string> endpointUrls,
                                                      Gateway& gateway, int intervalMs,
                                                      int leaseMs);

}  // namespace holdback::gateway
