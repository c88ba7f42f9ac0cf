// Replica sync over Redis (--replica-sync redis://HOST:PORT): the gateway's implementation of the
// library's ReplicaSync seam (holdback/detector/replica_sync.hpp), on hiredis (Debian
// libhiredis-dev), driven by a background thread. Replicas that name the same model servers
// (the same --endpoint URLs) share their pending dispatches per server through one Redis.
//
// Every key and channel starts with the key prefix (--replica-sync-prefix; by default "holdback:"
// and a hash of the config and the model servers, so that fleets configured apart never share),
// written <P> below. Every --replica-sync-interval-ms, one round on the sync thread (two pipelined
// round trips):
//   HSET <P>replica:<id> <endpoint url> "<requests> <tokens>" ...   this replica's pending
//        @restore "<arrivals/s> <completions/s> <revocations pending> <leases> <victim lists>
//                  <count> <dispatch time>... <heads> <priority> <enqueue time>..."
//                  (replica_figures_text.hpp)
//        @fingerprint <config fingerprint>                           (replica_input.hpp)
//   PEXPIRE <P>replica:<id> <--replica-sync-ttl-ms>                  dies with the replica
//   ZADD <P>replicas <now ms> <id>; ZREMRANGEBYSCORE ... older than the TTL; ZRANGE (at most
//   ReplicaInputLimits::kMaxReplicas + 1)
//   HMGET <P>replica:<other> <endpoint url> ... @restore @fingerprint  per other replica
// The other replicas' figures are summed per endpoint (saturating) and installed in the ledger
// (DispatchLedger::setPeerPending); their restoration figures (@restore: the protected bands'
// arrival rate, every band's completion rate, revocations outstanding or cooling, leases) are
// summed and installed in the controller (ReplicaPort::setShare), with this replica's
// rank among the live identities sorted, so that the replicas restore the reserve as one (with
// ReplicaShare::pooledArrivals while `feed` is live: replica_feed.hpp). A replica
// that dies stops refreshing its hash, which expires: its share leaves the others' sums within the
// TTL plus one interval. <id> is HOST-PID-RANDOM.
//
// Nothing read back is trusted (replica_input.hpp): a replica whose @fingerprint differs from
// this one's (or is missing) is ignored, logged once and shown in
// holdback_gateway_replica_sync_foreign_replicas; every other value is parsed strictly and
// bounded, and one that does not pass is ignored, counted in
// holdback_gateway_replica_sync_rejected_total{reason} and logged at most every 30 s per reason.
// A replica counts as live only with the right fingerprint and at least one value taken. An error
// or a reply of another type for one replica ignores that replica; a reply over the size limits
// fails the round.
//
// Redis down or slow: connects and commands time out after max(interval, 50 ms); the round
// fails, the ledger falls back to the 1/R share (R: the most replicas last seen, at least the
// config's flowControl.dispatchLedger.replicas), the change is logged once to stderr and shown in
// holdback_gateway_replica_sync_fallback; the next rounds reconnect. A dispatch never waits for
// Redis: only the sync thread talks to it.
//
// Thread safety: ReplicaSyncThread is created and destroyed on one thread; its round runs on its
// own thread; the ledger and the counters it writes are thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gateway.hpp"
#include "gateway_http.hpp"
#include "replica_feed.hpp"

namespace holdback::gateway {

class ReplicaSyncThread {
 public:
  // Starts the sync thread for `pool`'s endpoints (named by `endpointUrls`, in pool order) and
  // the controller's reserve restoration (its ReplicaPort). Built only with hiredis (main.cpp
  // refuses --replica-sync without it).
  static std::unique_ptr<ReplicaSyncThread> start(const RedisStore& redis,
                                                  std::vector<std::string> endpointUrls, Pool& pool,
                                                  ReplicaPort replicas, GatewayCounters& counters,
                                                  int intervalMs, int ttlMs,
                                                  const ReplicaFeed* feed = nullptr);
  virtual ~ReplicaSyncThread() = default;  // stops and joins the thread
  ReplicaSyncThread(const ReplicaSyncThread&) = delete;
  ReplicaSyncThread& operator=(const ReplicaSyncThread&) = delete;

 protected:
  ReplicaSyncThread() = default;
};

}  // namespace holdback::gateway
