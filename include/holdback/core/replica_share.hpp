// What gateway replicas share for reserve restoration: each replica's own figures, published
// through the host's store (ReplicaSync, detector/replica_sync.hpp), and the others' sum with
// the replicas' count and this replica's rank, installed into its FlowController
// (ReplicaPort::setShare). With them the replicas take one restoration decision for
// the pool and each revokes its part of it (flow/eviction.hpp, "Restoration across replicas").
//
// Thread safety: plain data.
#pragma once

#include "holdback/abi.hpp"
#include "holdback/core/types.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// One replica's reserve-restoration figures (or several replicas' sum).
struct ReplicaRestoreFigures {
  // How many of the youngest victims a publication carries (victimDispatchTimes).
  static constexpr std::size_t kVictims = 16;

  double protectedArrivalRate = 0.0;  // the protected bands' arrivals per second
  double completionRate = 0.0;        // every band's releases per second
  double pendingRevocations = 0.0;    // revocations outstanding or cooling
  double leases = 0.0;                // requests dispatched and not ended
  // The replicas whose victim lists these figures carry (1 in a replica's own figures once it
  // has taken a restoration decision; the sum in the others'). Restoration chooses its victims
  // pool-wide only when every other live replica publishes its list.
  double victimLists = 0.0;
  // When the youngest requests restoration may revoke there were dispatched, youngest first, in
  // seconds on the controller's clock (TimePoint::time_since_epoch()): the first victimCount
  // entries are used. Merged, the youngest kVictims of all the lists. Replicas compare them
  // across processes: a store that crosses hosts converts them to a shared clock and back (the
  // gateway's Redis store does, through the wall clock).
  std::array<double, kVictims> victimDispatchTimes{};
  std::size_t victimCount = 0;
  // How many bands' queue heads a publication carries (headPriorities, headEnqueueTimes).
  static constexpr std::size_t kHeads = 8;
  // The head of every band with queued requests (the request the band dispatches next): its
  // priority and when it was enqueued, in seconds on the controller's clock like the victims'
  // times; the first headCount entries are used. Merged, the oldest head per priority (the
  // highest kHeads priorities). A replica yields a dispatch to another whose head of the same
  // band has waited longer (ReplicaPort::setShare), so that the pool serves each band
  // oldest first whichever replica a request arrived at.
  std::array<std::int64_t, kHeads> headPriorities{};
  std::array<double, kHeads> headEnqueueTimes{};
  std::size_t headCount = 0;

  // Adds another replica's figures (a store summing the others' publications): the figures
  // summed, the victim lists merged. Survives any input: a non-finite time counts as the oldest
  // possible, a count above kVictims as kVictims.
  ReplicaRestoreFigures& operator+=(const ReplicaRestoreFigures& o) noexcept {
    protectedArrivalRate += o.protectedArrivalRate;
    completionRate += o.completionRate;
    pendingRevocations += o.pendingRevocations;
    leases += o.leases;
    victimLists += o.victimLists;
    const std::size_t mine = victimsUsed();
    const std::size_t theirs = o.victimsUsed();
    std::array<double, kVictims> merged{};
    std::size_t n = 0;
    std::size_t i = 0;
    std::size_t j = 0;
    while (n < kVictims && (i < mine || j < theirs)) {
      const bool takeMine = j >= theirs || (i < mine && sane(victimDispatchTimes[i]) >=
                                                            sane(o.victimDispatchTimes[j]));
      merged[n++] = takeMine ? sane(victimDispatchTimes[i++]) : sane(o.victimDispatchTimes[j++]);
    }
    victimDispatchTimes = merged;
    victimCount = n;
    for (std::size_t k = 0; k < o.headsUsed(); ++k) {
      addHead(o.headPriorities[k], o.headEnqueueTimes[k]);
    }
    return *this;
  }

  // Adds the head of band `priority`, enqueued at `seconds`: the older of it and the one already
  // there for that priority; a new priority displaces the lowest one when all kHeads are used.
  // A non-finite time is ignored (no replica yields to a head it cannot place in time).
  void addHead(std::int64_t priority, double t) noexcept {
    if (!finiteTime(t)) return;
    const std::size_t used = headsUsed();
    std::size_t lowest = 0;
    for (std::size_t k = 0; k < used; ++k) {
      if (headPriorities[k] == priority) {
        if (t < headEnqueueTimes[k]) headEnqueueTimes[k] = t;
        return;
      }
      if (headPriorities[k] < headPriorities[lowest]) lowest = k;
    }
    if (used < kHeads) {
      headPriorities[used] = priority;
      headEnqueueTimes[used] = t;
      headCount = used + 1;
    } else if (priority > headPriorities[lowest]) {
      headPriorities[lowest] = priority;
      headEnqueueTimes[lowest] = t;
    }
  }

  // When the oldest published head of band `priority` was enqueued (seconds), or nothing.
  [[nodiscard]] std::optional<double> headOf(std::int64_t priority) const noexcept {
    for (std::size_t k = 0; k < headsUsed(); ++k) {
      if (headPriorities[k] == priority) return headEnqueueTimes[k];
    }
    return std::nullopt;
  }

  // The entries of headPriorities / headEnqueueTimes in use: the first headCount, at most kHeads.
  [[nodiscard]] std::size_t headsUsed() const noexcept {
    return headCount < kHeads ? headCount : kHeads;
  }

  // Adds a victim dispatched at `seconds` to this replica's own list, keeping the kVictims
  // youngest, youngest first.
  void addVictim(double seconds) noexcept {
    const double t = sane(seconds);
    std::size_t k = victimsUsed();
    if (k == kVictims) {
      if (!(t > victimDispatchTimes[k - 1])) return;
      --k;
    }
    while (k > 0 && victimDispatchTimes[k - 1] < t) {
      victimDispatchTimes[k] = victimDispatchTimes[k - 1];
      --k;
    }
    victimDispatchTimes[k] = t;
    if (victimCount < kVictims) ++victimCount;
  }

  // The entries of victimDispatchTimes in use: the first victimCount, at most kVictims.
  [[nodiscard]] std::size_t victimsUsed() const noexcept {
    return victimCount < kVictims ? victimCount : kVictims;
  }

  // A dispatch time as the lists order it: a non-finite one as the oldest possible.
  [[nodiscard]] static double sane(double seconds) noexcept {
    return finiteTime(seconds) ? seconds : -1e300;
  }

  // Whether `seconds` is a time the lists and heads can order (finite, NaN excluded).
  [[nodiscard]] static bool finiteTime(double seconds) noexcept {
    return seconds >= -1e300 && seconds <= 1e300;
  }

  // `t` as the figures carry times: seconds on the controller's clock.
  [[nodiscard]] static double secondsOf(TimePoint t) noexcept {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  }
};

// Which replica has the turn: the one rule every split of work among replicas uses (the
// ledger's free room split, restoration's part of the pool's revocations, the room past the KV
// threshold). Replica `rank` of `replicas` has position (rank + index + the step) mod replicas
// on item `index` (an endpoint; 0 for a pool-wide split) at time `t`, the step being
// floor((t + clockOffset) / kStep): the turn moves every kStep on a clock every replica reads
// alike, so at any time the R replicas hold the R positions of each item, and each holds
// position 0 on 1/R of the items.
//
// Thread safety: plain data.
struct ReplicaTurn {
  static constexpr Duration kStep = std::chrono::milliseconds(100);

  std::int64_t rank = 0;
  std::int64_t replicas = 1;
  // The shared clock less the controller's (ReplicaSync::clockOffset); 0 on one host.
  Duration clockOffset{0};

  // This replica's position on `index` at `t` (the controller's clock): in [0, replicas); 0 with
  // fewer than two replicas; -1 for a rank outside [0, replicas).
  [[nodiscard]] std::int64_t position(std::size_t index, TimePoint t) const noexcept {
    if (replicas <= 1) return 0;
    if (rank < 0 || rank >= replicas) return -1;
    // The step of t + clockOffset, summed per term so that no input overflows.
    constexpr std::int64_t p = std::chrono::duration_cast<Duration>(kStep).count();
    const auto floorDiv = [](std::int64_t v, std::int64_t& rem) {
      std::int64_t q = v / p;
      rem = v - q * p;
      if (rem < 0) {
        --q;
        rem += p;
      }
      return q;
    };
    std::int64_t ra = 0;
    std::int64_t rb = 0;
    const std::int64_t steps = floorDiv(t.time_since_epoch().count(), ra) +
                               floorDiv(clockOffset.count(), rb) + (ra + rb >= p ? 1 : 0);
    const auto at = static_cast<std::int64_t>(index % static_cast<std::uint64_t>(replicas));
    return ((rank + at + steps % replicas) % replicas + replicas) % replicas;
  }
  // Whether this replica has the turn on `index` at `t` (position 0): true with fewer than two
  // replicas, false for a rank outside [0, replicas).
  [[nodiscard]] bool hasTurn(std::size_t index, TimePoint t) const noexcept {
    return position(index, t) == 0;
  }
  // This replica's part of `n` units split on `index` at `t`: n / R, plus one of the remainder
  // when its position is below n mod R. The parts of the R replicas sum to n; the remainder
  // moves from replica to replica with the turn. `n` with fewer than two replicas; 0 for a rank
  // outside [0, replicas).
  [[nodiscard]] std::uint64_t part(std::uint64_t n, std::size_t index, TimePoint t) const noexcept {
    const std::int64_t at = position(index, t);
    if (replicas <= 1) return n;
    if (at < 0) return 0;
    const auto r = static_cast<std::uint64_t>(replicas);
    return n / r + (static_cast<std::uint64_t>(at) < n % r ? 1 : 0);
  }
};

// ReplicaShare::headTolerance's default: 100 ms, against heads published every few milliseconds.
inline constexpr Duration kDefaultReplicaHeadTolerance = std::chrono::milliseconds(100);

// What a replica learns from the store each sync round: the other live replicas' figures (their
// sum), how many replicas are live (this one included) and this replica's rank among them: in
// [0, replicas), distinct per replica, in an order all of them agree on. Installed into the
// controller's replica coordination (ReplicaPort::setShare).
struct ReplicaShare {
  ReplicaRestoreFigures others;
  std::int64_t replicas = 1;
  std::int64_t rank = 0;
  // Every replica's demand estimates count the pool's arrivals (the host's replica feed hands
  // each replica the others' with ReplicaPort::recordPeerArrival): the policies then size
  // from the pool's turnover rather than a replica's part of it, and restoration does not add
  // the others' published arrival rates (they are in its own). Set it on every replica or none.
  bool pooledArrivals = false;
  // Pool-wide oldest first, with pooledArrivals (the replica feed): this replica leaves a
  // dispatch from a band to the others while one of them published a head of the same band
  // (ReplicaRestoreFigures::headEnqueueTimes) enqueued more than this long before this replica's
  // own head. Requests then wait about as long whichever replica they arrived at. Without the
  // feed the ledger's free room split already gives every replica its part of each scrape's room
  // (a part left to another replica would idle until the next scrape), and the rule is off. Keep
  // it above the store's staleness (the heads are up to a sync interval old); Duration::max()
  // turns it off; a negative one counts as 0.
  Duration headTolerance = kDefaultReplicaHeadTolerance;
  // A clock every replica reads alike, less this controller's clock (ReplicaSync::clockOffset):
  // every turn (ReplicaTurn) steps on it. 0 when the replicas share the controller's clock (one
  // host's steady clock, the simulator); the gateway's Redis store: the wall clock less the
  // steady one.
  Duration clockOffset{0};

  // This replica's turn among the live replicas.
  [[nodiscard]] ReplicaTurn turn() const noexcept { return {rank, replicas, clockOffset}; }
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
