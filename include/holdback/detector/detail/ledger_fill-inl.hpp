// Implementation of holdback/detector/dispatch_ledger.hpp, the fill algorithm: an endpoint's
// figures from its slot (the correction, the replica share or sync, the budget) and the fill
// loops (DispatchLedger::fill, fillInFlight). Included by dispatch_ledger-inl.hpp.
#pragma once

#include "holdback/detector/dispatch_ledger.hpp"

#include <algorithm>
#include <cmath>

#include "holdback/core/replica_share.hpp"
#include "holdback/detector/detail/ledger_slot-inl.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// The free room split (see "The free room split" in the header): the parts of `room` free
// slots (a scrape's M - running - sharedRoomSlots) on endpoint `index` of this replica and of
// the others together, by `turn` at the scrape's time `at`.
struct SlotParts {
  double mine = 0.0;
  double others = 0.0;
};
[[nodiscard]] inline SlotParts slotParts(double room, const ReplicaTurn& turn, std::uint32_t index,
                                         TimePoint at) noexcept {
  if (!(room >= 1.0)) return {};  // also NaN
  const auto f = static_cast<std::uint64_t>(std::floor(room < 4294967295.0 ? room : 4294967295.0));
  const std::uint64_t mine = turn.part(f, index, at);
  return {static_cast<double>(mine), static_cast<double>(f - mine)};
}

// A counter's growth since its low 32 bits were `mark` (less than 2^32 between two syncs).
[[nodiscard]] inline double sinceSync(std::uint64_t counter, std::uint32_t mark) noexcept {
  return static_cast<double>(static_cast<std::uint32_t>(counter) - mark);
}

// fill's figures for one endpoint from a consistent read of its slot (see "The algorithm").
// `feed`: the replica feed is live (DispatchLedger::setPeerFeed); `clockOffset`: the replicas'
// shared clock less this one (DispatchLedger::setReplicaClockOffset).
[[gnu::always_inline]] inline void fillFrom(Endpoint& e, const LedgerSlot& slotRef,
                                            const ScrapeView& v, const ScrapeMark& c,
                                            const DispatchLedgerOptions& options, bool feed,
                                            Duration clockOffset) noexcept {
  const LedgerSlot* slot = &slotRef;
  e.maxRunningRequests = slotsInUse(*slot);
  const double capacity_per_token = slot->kvPerToken.load(std::memory_order_relaxed);
  e.kvCapacityTokens =
      capacity_per_token > 0.0 ? std::llround(1.0 / capacity_per_token) : std::int64_t{0};
  e.inFlightRequests = std::max<std::int64_t>(0, since(c.dispatchedRequests, c.completedRequests));
  e.inFlightTokens = std::max<std::int64_t>(0, since(c.dispatchedTokens, c.completedTokens));
  ScrapeMark fed;  // the feed's counters, read once for both uses below
  if (feed) {
    // The pool's requests in flight: this replica's and, as the feed reported them, the others'.
    readPeerCounters(slotRef, fed);
    e.inFlightRequests +=
        std::max<std::int64_t>(0, since(fed.peerDispatchedRequests, fed.peerCompletedRequests));
    e.inFlightTokens +=
        std::max<std::int64_t>(0, since(fed.peerDispatchedTokens, fed.peerCompletedTokens));
  }
  if (!v.has) {
    e.updateTime.reset();
    e.waitingQueueSize = 0.0;
    e.runningRequests = 0.0;
    e.kvCacheUsage = 0.0;
    return;
  }
  e.updateTime = TimePoint(Duration(v.updateTimeNs));
  e.waitingQueueSize = v.waiting;
  e.runningRequests = v.running;
  e.kvCacheUsage = v.kv;
  if (!v.correctable) return;  // decided at install (storeScrape)
  if (options.correction) {
    std::int64_t pending = since(c.dispatchedRequests, v.base.dispatchedRequests) -
                           since(c.completedRequests, v.base.completedRequests);
    std::int64_t pending_tokens = since(c.dispatchedTokens, v.base.dispatchedTokens) -
                                  since(c.completedTokens, v.base.completedTokens);
    if (feed) {
      // The replica feed: the other replicas' work since this scrape's baseline, as one ledger
      // would count it (see "The replica feed"); no share, no sums, no split.
      pending += since(fed.peerDispatchedRequests, v.base.peerDispatchedRequests) -
                 since(fed.peerCompletedRequests, v.base.peerCompletedRequests);
      pending_tokens += since(fed.peerDispatchedTokens, v.base.peerDispatchedTokens) -
                        since(fed.peerCompletedTokens, v.base.peerCompletedTokens);
    }
    // Each replica's own pending work, times the replicas (see DispatchLedgerOptions::replicas),
    // or with replica sync (setPeerPending) its own plus the other replicas' reported sum.
    const std::int64_t peer_requests = slot->peerRequests.load(std::memory_order_relaxed);
    const std::uint16_t peer_replicas = slot->peerReplicas.load(std::memory_order_relaxed);
    const auto replicas =
        feed ? 1.0
             : static_cast<double>(peer_replicas > options.replicas ? std::int64_t{peer_replicas}
                                                                    : options.replicas);
    const bool synced = !feed && peer_requests >= 0;
    const std::uint32_t slots = slotsInUse(*slot);
    const double own_pending = static_cast<double>(pending > 0 ? pending : 0);
    // Without sync: this replica's own pending work times R. With sync: its own, plus the
    // others' reported sum, plus what they dispatched since it was installed, estimated as R - 1
    // times this replica's own dispatches since then; with a rank, the others' part never less
    // than their parts of the scrape's free slots once this replica has sent its own part.
    double p = static_cast<double>(pending) * replicas;
    if (synced) {
      double peers = static_cast<double>(peer_requests) +
                     sinceSync(c.dispatchedRequests,
                               slot->syncDispatchedRequests.load(std::memory_order_relaxed)) *
                         (replicas - 1.0);
      const std::int32_t rank = slot->peerRank.load(std::memory_order_relaxed);
      if (rank >= 0 && slots != 0) {
        // (Before that the view is the unsplit one: the pool's load as known, for policies that
        // read its level; see "The free room split".)
        // The turn at the scrape's time: every replica reading a scrape of about the same time
        // splits its room alike, and a replica's part holds for the scrape's life.
        const SlotParts parts = slotParts(
            static_cast<double>(slots) - v.running - static_cast<double>(options.sharedRoomSlots),
            ReplicaTurn{rank, static_cast<std::int64_t>(replicas), clockOffset},
            slot->index.load(std::memory_order_relaxed), TimePoint(Duration(v.updateTimeNs)));
        if (own_pending >= parts.mine && parts.others > peers) peers = parts.others;
      }
      p = own_pending + peers;
    }
    if (synced ? p > 0.0 : pending > 0) {
      if (slots != 0) {
        const auto m = static_cast<double>(slots);
        const double free_slots = m > v.running ? m - v.running : 0.0;
        const double queued = v.running + p - m;
        e.runningRequests = v.running + (p < free_slots ? p : free_slots);
        e.waitingQueueSize = v.waiting + (queued > 0.0 ? queued : 0.0);
      } else {
        e.runningRequests = v.running + p;
        e.waitingQueueSize = v.waiting + p;
      }
    } else if (pending < 0 && !synced && options.creditCompletions) {
      // Requests the scrape showed have ended since: the freed capacity, at once. Not times the
      // replicas: only this replica's completions are known.
      const double freed = -static_cast<double>(pending);
      const double left = v.running + v.waiting - freed;
      const double total = left > 0.0 ? left : 0.0;
      e.runningRequests = total < v.running ? total : v.running;
      e.waitingQueueSize = total - e.runningRequests;
    }
    const double own_tokens = static_cast<double>(pending_tokens > 0 ? pending_tokens : 0);
    const double reported_tokens =
        static_cast<double>(slot->peerTokens.load(std::memory_order_relaxed));
    const double own_tokens_since_sync =
        sinceSync(c.dispatchedTokens, slot->syncDispatchedTokens.load(std::memory_order_relaxed));
    const double tokens_total =
        synced ? own_tokens + reported_tokens + own_tokens_since_sync * (replicas - 1.0)
               : static_cast<double>(pending_tokens) * replicas;
    if (capacity_per_token > 0.0 && tokens_total > 0.0) {
      const double kv = v.kv + tokens_total * capacity_per_token;
      e.kvCacheUsage = kv < 1.0 ? kv : 1.0;
    }
  }
  if (options.dispatchBudget &&
      since(c.dispatchedRequests, v.base.dispatchedRequests) >= v.budget) {  // already the share
    const auto depth = static_cast<double>(options.budgetQueueDepth);
    if (e.waitingQueueSize < depth) e.waitingQueueSize = depth;
  }
}

// The same after a raced read (a scrape being installed, a dispatch during the read), with the
// retry loops. Out of line: with the loops inlined into fill's loop, the compiler hoisted every
// field address out of them and spilled the values read (BM_LedgerFill, docs/performance.md).
[[gnu::noinline]] inline void fillRetry(Endpoint& e, const LedgerSlot& slot,
                                        const DispatchLedgerOptions& options, bool feed,
                                        Duration clockOffset) noexcept {
  const ScrapeView v = readScrape(slot);
  const ScrapeMark c = readCounters(slot);
  fillFrom(e, slot, v, c, options, feed, clockOffset);
}

}  // namespace detail

// Always inlined into the fill loops (only they call it).
[[gnu::always_inline]] inline void DispatchLedger::fillOne(Endpoint& e,
                                                           const detail::LedgerSlot* slot,
                                                           const DispatchLedgerOptions& options,
                                                           bool feed,
                                                           Duration clockOffset) noexcept {
  if (slot == nullptr) {
    detail::clearTelemetry(e);
    return;
  }
  detail::ScrapeView v;
  ScrapeMark c;
  if (!detail::tryReadScrape(*slot, v) || !detail::tryReadCounters(*slot, c)) [[unlikely]] {
    detail::fillRetry(e, *slot, options, feed, clockOffset);
    return;
  }
  detail::fillFrom(e, *slot, v, c, options, feed, clockOffset);
}

HOLDBACK_INLINE void DispatchLedger::fill(std::span<Endpoint> endpoints,
                                          std::span<const EndpointId> ids) const noexcept {
  const std::size_t n = std::min(endpoints.size(), ids.size());
  const DispatchLedgerOptions options = options_;  // kept in registers across the atomics
  const bool feed = peerFeed();
  const Duration offset = replicaClockOffset();
  for (std::size_t k = 0; k < n; ++k) {
    fillOne(endpoints[k], slotOf(ids[k]), options, feed, offset);
  }
}

HOLDBACK_INLINE void DispatchLedger::fill(std::span<Endpoint> endpoints) const noexcept {
  std::shared_lock lock(registry_mutex_);
  const bool feed = peerFeed();
  const Duration offset = replicaClockOffset();
  for (Endpoint& e : endpoints) {
    const auto index = indexOf(e.name);
    fillOne(e, index ? &slotAt(*index) : nullptr, options_, feed, offset);
  }
}

HOLDBACK_INLINE void DispatchLedger::fillInFlight(std::span<Endpoint> endpoints) const noexcept {
  std::shared_lock lock(registry_mutex_);
  for (Endpoint& e : endpoints) {
    const auto index = indexOf(e.name);
    if (!index) {
      e.inFlightRequests = 0;
      e.inFlightTokens = 0;
      continue;
    }
    const ScrapeMark c = detail::readCounters(slotAt(*index));
    e.inFlightRequests =
        std::max<std::int64_t>(0, detail::since(c.dispatchedRequests, c.completedRequests));
    e.inFlightTokens =
        std::max<std::int64_t>(0, detail::since(c.dispatchedTokens, c.completedTokens));
  }
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
