// The replica feed (--replica-sync redis://HOST:PORT, on unless --replica-feed off): every
// replica's dispatches, completions and arrivals reach the other replicas as they happen, so each
// replica's ledger counts the pool's work since its own scrape as one ledger would and its demand
// estimate counts the pool's arrivals (the library side: "The replica feed" in
// holdback/detector/replica_sync.hpp).
//
// ReplicaFeedSink is what the gateway calls on each event (Pool::pick and Pool::complete, the
// request handler before enqueue); it only queues the event (a mutex and a copy into a ring of
// fixed size: no allocation, no I/O; a full ring drops the event and counts it).
//
// On Redis (replica_feed_redis.cpp), two threads per replica:
//   publisher:  PUBLISH <prefix>feed "<id> <fingerprint>\n<event>\n..." with every event queued
//               since its last message (at least one message every 100 ms: a heartbeat; a batch
//               over 1 MiB goes in several messages);
//   subscriber: SUBSCRIBE <prefix>feed; applies the events of every other replica (endpoints by
//               URL, so replicas may list them in any order): DispatchLedger::recordPeerDispatch /
//               recordPeerCompletion, ReplicaPort::recordPeerArrival.
//   The channel is <prefix>feed:<db> on a database other than 0 (channels are not per database).
//   A message from a replica of another config fingerprint is ignored (logged once per replica),
//   and every message is checked as the sync's values are (replica_input.hpp): a malformed or
//   out-of-range event is ignored and counted in holdback_gateway_replica_sync_rejected_total,
//   a message over 4 MiB fails the read, and at most ReplicaInputLimits::kMaxReplicas other
//   replicas and kMaxFeedEvents events per message are taken.
//   Events: "D <tokens> <url>" a dispatch, "C <tokens> <url>" a completion, "A <kvTokens>
//   <priority>" an arrival.
// The feed is live while the subscriber is subscribed and hears a message (its own heartbeat
// included) at least every 500 ms: DispatchLedger::setPeerFeed follows it, and the sync thread
// sets ReplicaShare::pooledArrivals from it. Redis down or slow: the feed goes down (logged once,
// holdback_gateway_replica_feed_live 0), the ledger uses the synced sums or the 1/R share, and
// the threads reconnect every 200 ms. Events lost meanwhile count until each replica's next
// scrape. A dispatch never waits for Redis.
// The subscriber also keeps what each other replica has in flight per endpoint (its dispatches
// less its completions): a replica not heard from for 2 s (its heartbeat included), and every
// replica when the feed goes down, has that completed in the ledger, so the pool's in-flight
// counts (DispatchLedger fill with the feed live) do not keep a dead replica's requests; and it
// applies a completion only when it was told of a dispatch of that replica to that endpoint that
// is still open (one it missed, or already completed itself, would lower the pool's in-flight
// count for good; ignored, it only leaves that request pending until the next scrape).
//
// Thread safety: the sink's methods may be called from any thread at once; the feed object is
// created and destroyed on one thread (its destructor stops and joins both threads, within about
// 500 ms).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway.hpp"
#include "gateway_http.hpp"
#include "holdback/core/types.hpp"
#include "options.hpp"

namespace holdback::gateway {

// Where the replicas meet in Redis, and what they must agree on.
struct RedisStore {
  RedisUrl url;             // --replica-sync
  std::string prefix;       // every key and channel starts with it (--replica-sync-prefix)
  std::string fingerprint;  // configFingerprint(): replicas that publish another are ignored
};

class ReplicaFeedSink {
 public:
  virtual ~ReplicaFeedSink() = default;
  // This replica dispatched a request of `tokens` (its declared KV footprint) to endpoint
  // `endpoint` (pool order), or one of them there ended; a request of `priority` declaring
  // `kvTokens` was queued here.
  virtual void dispatched(std::size_t endpoint, std::int64_t tokens) noexcept = 0;
  virtual void completed(std::size_t endpoint, std::int64_t tokens) noexcept = 0;
  virtual void arrived(Priority priority, std::int64_t kvTokens) noexcept = 0;
};

class ReplicaFeed : public ReplicaFeedSink {
 public:
  // Starts the feed over Redis for `pool`'s endpoints (named by `endpointUrls`, in pool order)
  // and the controller's demand (its ReplicaPort). Built only with hiredis.
  static std::unique_ptr<ReplicaFeed> start(const RedisStore& redis,
                                            std::vector<std::string> endpointUrls, Pool& pool,
                                            ReplicaPort replicas, GatewayCounters& counters);
  // Whether the feed delivers the other replicas' events now.
  [[nodiscard]] virtual bool live() const noexcept = 0;
};

}  // namespace holdback::gateway
