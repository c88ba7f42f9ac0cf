// Replica sync: gateway replicas that share their pending dispatches through a store the host
// provides (Redis, a database, a bus), so that each replica's DispatchLedger counts the work the
// others sent since the last scrape instead of assuming they sent as much as it did.
//
// Why
//   Each replica's ledger sees only its own dispatches. With DispatchLedgerOptions::replicas = R
//   it multiplies its own pending work by R: right when arrivals are spread evenly, wrong when
//   they are not (one replica carries the interactive traffic, another a batch flood: the busy one
//   over-counts, the quiet one under-counts and hands out slots the busy one has already taken).
//   With the other replicas' pending work known (at most one sync interval old), fill counts
//   this replica's own pending work plus theirs, plus R - 1 times this replica's dispatches
//   since the sync (the others' since then are not in their sum yet).
//
// The seam
//   ReplicaSync is what the host implements: one call, exchange(), that publishes this
//   replica's pending work per endpoint and returns the other live replicas' sum per endpoint.
//   ReplicaSyncer drives it: syncOnce() reads DispatchLedger::localPending for each endpoint,
//   calls exchange() (no ledger lock is held: the ledger has none on this path), and installs the
//   result with DispatchLedger::setPeerPending. The host calls syncOnce() on a thread of its own
//   every sync interval (the gateway: a background thread; the simulator: a timed event); a
//   dispatch never waits for it. When exchange() fails (the store is down or slow), syncOnce()
//   clears the peers' figures and the ledger falls back to the `replicas` share, times the most
//   replicas it saw live (at least options.replicas).
//   A store that also ranks the live replicas (rank(): this replica's position in an order all
//   of them agree on, such as their sorted identities) lets the ledger split each scrape's free
//   room among them ("The free room split" in dispatch_ledger.hpp): every replica reads the same
//   scrape, and without the split all of them take the same free slot before any sync can tell
//   the others.
//
// What a host's exchange() must do
//   - publish `mine` under this replica's identity with an expiry (a dead replica's share must
//     vanish within a bounded time; the gateway's Redis implementation uses key TTLs);
//   - sum, per endpoint, the latest publication of every other replica that has not expired;
//   - bound its own time (a timeout well under the sync interval's multiple the host tolerates):
//     the figures installed stay in use until the next successful or failed exchange.
//
// Restoration across replicas
//   The exchange also carries each replica's reserve-restoration figures (core/replica_share.hpp):
//   syncOnce(mine) publishes `mine` (the host passes ReplicaPort::restoreFigures) and
//   share() returns the others' sum with the live replicas and this replica's rank, for
//   ReplicaPort::setShare; std::nullopt after a failed exchange, before the first, or
//   without a rank (each replica then restores alone). A gateway's sync thread:
//     syncer.syncOnce(controller.replicaPort().restoreFigures());
//     controller.replicaPort().setShare(syncer.share());
//   The figures carry the dispatch times of each replica's youngest victims and the enqueue times
//   of its queue heads on the controller's clock (ReplicaRestoreFigures::victimDispatchTimes,
//   headEnqueueTimes); a store whose replicas run on several hosts converts them to a clock the
//   hosts share and back (the gateway's Redis store: the wall clock), so that every replica ranks
//   the pool's victims alike and serves each band oldest first across the pool.
//
// The replica feed
//   Sums exchanged every sync interval are a sync interval old, and every replica reads the same
//   scrape: the free room split keeps them from taking the same free slot, at the price of room
//   a replica holds and does not use until the next scrape. A host that can deliver every
//   replica's events to the others as they happen (a message bus, Redis pub/sub) runs a feed:
//     - on every dispatch and completion, publish (endpoint, tokens) without waiting for the
//       store; on every enqueue, publish (priority, kvTokens);
//     - on every event received from another replica: DispatchLedger::recordPeerDispatch /
//       recordPeerCompletion, ReplicaPort::recordPeerArrival;
//     - DispatchLedger::setPeerFeed(true) while the feed delivers (false when its connection
//       breaks: the sums and the split, or the `replicas` share, apply again), and set
//       ReplicaShare::pooledArrivals on the share installed by the sync thread;
//     - scrape on each replica's own timer (not at one instant for all: a scrape's freed room
//       is then seen first by the replica that scraped it).
//   Each ledger then counts the pool's work since its own scrape as one ledger would, and every
//   replica's demand estimate counts the pool's arrivals (a replica's own 1/R of them is a
//   noisier estimate). The sync thread keeps running for the restoration figures and the ranks.
//   Nothing waits for the store: an event the feed loses counts (a dispatch) or is missed (a
//   completion) until the replica's next scrape. docs/results/replicas.md, "The replica feed",
//   measures it.
//
// Cost: syncOnce() allocates nothing (its buffers are sized at construction); one
// localPending and one setPeerPending per endpoint (a few atomic loads and stores).
//
// Thread safety: ReplicaSync implementations are called from one thread at a time (the
// syncer's caller). ReplicaSyncer is thread-compatible: one thread calls syncOnce(); the ledger
// it writes to is thread-safe and may be used concurrently by any thread.
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "holdback/core/replica_share.hpp"
#include "holdback/detector/dispatch_ledger.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// The store the replicas share, implemented by the host (see the header comment).
class HOLDBACK_API ReplicaSync {
 public:
  virtual ~ReplicaSync() = default;
  // Publishes `mine` (this replica's pending work, mine[k] for the syncer's endpoint k) and
  // writes into `othersSum` (same size, zeroed by the caller) the sum of the other live replicas'
  // latest publications. Returns the number of other live replicas seen (>= 0), or -1 when the
  // store could not be reached in time (`othersSum` is then ignored). Must not throw.
  // Also publishes `mineFigures` and writes into `othersFigures` (zeroed by the caller) the
  // other live replicas' latest figures, summed.
  virtual std::int64_t exchange(std::span<const InFlightLoad> mine,
                                std::span<InFlightLoad> othersSum,
                                const ReplicaRestoreFigures& mineFigures,
                                ReplicaRestoreFigures& othersFigures) noexcept = 0;
  // This replica's position among the live replicas the last successful exchange saw (this one
  // included), in [0, that count), in an order every replica agrees on; -1: no ranking (the
  // default: the free room is not split). Distinct replicas must get distinct ranks.
  [[nodiscard]] virtual std::int64_t rank() const noexcept { return -1; }
  // A clock every replica reads alike, less the controller's clock (steady_clock): the default
  // 0 serves replicas that share the controller's clock (one host); replicas on several hosts
  // return, for example, the wall clock less the steady one. Goes into
  // ReplicaShare::clockOffset and DispatchLedger::setReplicaClockOffset, on which the replicas
  // take turns (ReplicaTurn).
  [[nodiscard]] virtual Duration clockOffset() const noexcept { return Duration::zero(); }
};

class HOLDBACK_API ReplicaSyncer {
 public:
  // `ledger` and `sync` must outlive the syncer; `endpoints` are the ids to share, in the order
  // the host's store names them (the host maps index k to an endpoint name).
  ReplicaSyncer(DispatchLedger& ledger, ReplicaSync& sync, std::vector<EndpointId> endpoints)
      : ledger_(ledger),
        sync_(sync),
        endpoints_(std::move(endpoints)),
        mine_(endpoints_.size()),
        others_(endpoints_.size()) {}

  // One round (see the header comment), publishing `mine` as this replica's restoration
  // figures. True when the exchange succeeded.
  bool syncOnce(const ReplicaRestoreFigures& mine = {}) noexcept {
    for (std::size_t k = 0; k < endpoints_.size(); ++k) {
      mine_[k] = ledger_.localPending(endpoints_[k]);
      others_[k] = InFlightLoad{};
    }
    ReplicaRestoreFigures others;
    const std::int64_t peers = sync_.exchange(mine_, others_, mine, others);
    if (peers >= 0) {
      last_replicas_ = peers + 1;
      const std::int64_t rank = sync_.rank();
      ledger_.setReplicaClockOffset(sync_.clockOffset());
      for (std::size_t k = 0; k < endpoints_.size(); ++k) {
        ledger_.setPeerPending(endpoints_[k], others_[k], last_replicas_, rank);
      }
      share_.reset();
      if (rank >= 0 && rank < last_replicas_) {
        share_ = ReplicaShare{others, last_replicas_, rank};
        share_->clockOffset = ledger_.replicaClockOffset();
      }
      ++successes_;
      return true;
    }
    for (const EndpointId id : endpoints_) ledger_.setPeerPending(id, std::nullopt, last_replicas_);
    share_.reset();
    ++failures_;
    return false;
  }

  // What the last round learned for reserve restoration (see "Restoration across replicas").
  [[nodiscard]] std::optional<ReplicaShare> share() const noexcept { return share_; }

  // Rounds that succeeded and failed so far, and the replicas (this one included) the last
  // successful round saw (0 before one).
  [[nodiscard]] std::uint64_t successes() const noexcept { return successes_; }
  [[nodiscard]] std::uint64_t failures() const noexcept { return failures_; }
  [[nodiscard]] std::int64_t replicasSeen() const noexcept { return last_replicas_; }

 private:
  DispatchLedger& ledger_;
  ReplicaSync& sync_;
  std::vector<EndpointId> endpoints_;
  std::vector<InFlightLoad> mine_;
  std::vector<InFlightLoad> others_;
  std::int64_t last_replicas_ = 0;
  std::optional<ReplicaShare> share_;
  std::uint64_t successes_ = 0;
  std::uint64_t failures_ = 0;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
