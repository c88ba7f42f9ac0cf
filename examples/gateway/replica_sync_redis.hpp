// Replica sync over Redis (--replica-sync redis://HOST:PORT): the gateway's implementation of the
// library's ReplicaSync seam (holdback/detector/replica_sync.hpp), on hiredis (Debian
// libhiredis-dev), driven by a background thread. Replicas that name the same model servers
// (the same --endpoint URLs) share their pending dispatches per server through one Redis.
//
// Every --replica-sync-interval-ms, one round on the sync thread (two pipelined round trips):
//   HSET holdback:replica:<id> <endpoint url> "<requests> <tokens>" ...   this replica's pending
//        @restore "<arrivals/s> <completions/s> <revocations pending> <leases> <victim lists>
//                  <count> <dispatch time>... <heads> <priority> <enqueue time>..."
//                  (replica_figures_text.hpp)
//   PEXPIRE holdback:replica:<id> <--replica-sync-ttl-ms>                 dies with the replica
//   ZADD holdback:replicas <now ms> <id>; ZREMRANGEBYSCORE ... older than the TTL; ZRANGE
//   HMGET holdback:replica:<other> <endpoint url> ...                     per other replica
// The other replicas' figures are summed per endpoint and installed in the ledger
// (DispatchLedger::setPeerPending); their restoration figures (@restore: the protected bands'
// arrival rate, every band's completion rate, revocations outstanding or cooling, leases) are
// summed and installed in the controller (FlowController::setReplicaShare), with this replica's
// rank among the live identities sorted, so that the replicas restore the reserve as one (with
// ReplicaShare::pooledArrivals while `feed` is live: replica_feed.hpp). A replica
// that dies stops refreshing its hash, which expires: its share leaves the others' sums within the
// TTL plus one interval. <id> is HOST-PID-RANDOM.
//
// Redis down or slow: connects and commands time out after max(interval, 50 ms); the round
// fails, the ledger falls back to the 1/R share (R: the most replicas last seen, at least the
// config's dispatchLedger.replicas), the change is logged once to stderr and shown in
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
  // `controller`'s reserve restoration. Built only with hiredis (main.cpp refuses
  // --replica-sync without it).
  static std::unique_ptr<ReplicaSyncThread> start(const HostPort& redis,
                                                  std::vector<std::string> endpointUrls, Pool& pool,
                                                  FlowController& controller,
                                                  GatewayCounters& counters, int intervalMs,
                                                  int ttlMs, const ReplicaFeed* feed = nullptr);
  virtual ~ReplicaSyncThread() = default;  // stops and joins the thread
  ReplicaSyncThread(const ReplicaSyncThread&) = delete;
  ReplicaSyncThread& operator=(const ReplicaSyncThread&) = delete;

 protected:
  ReplicaSyncThread() = default;
};

}  // namespace holdback::gateway
