// Implementation of holdback/detector/dispatch_ledger.hpp, scrape installation: the budget, the
// observed slot count, the in-flight reconciliation and the baseline
// (DispatchLedger::installScrape). Included by dispatch_ledger-inl.hpp.
#pragma once

#include "holdback/detector/dispatch_ledger.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "holdback/detector/detail/ledger_slot-inl.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// Moves `requests` (> 0) of `ofRequests` dispatches carrying `ofTokens` tokens behind the
// baseline `base`, so that they count as pending; their tokens pro rata.
inline void moveBehindBaseline(ScrapeMark& base, std::int64_t requests, std::int64_t ofRequests,
                               std::int64_t ofTokens) noexcept {
  const double share = static_cast<double>(requests) / static_cast<double>(ofRequests);
  base.dispatchedRequests -= static_cast<std::uint64_t>(requests);
  base.dispatchedTokens -= static_cast<std::uint64_t>(
      std::max<double>(0.0, std::floor(static_cast<double>(ofTokens) * share)));
}

// A free function, not a member: a member of the exported DispatchLedger taking a detail:: type
// would be exported (check_exports.sh forbids detail:: in exported signatures).
// `options` are the ledger's (sanitized) options.
HOLDBACK_INLINE void storeScrape(LedgerSlot& slot, const Scrape& scrape, const ScrapeMark& mark,
                                 const DispatchLedgerOptions& options) noexcept {
  // Decided here, once per scrape, rather than per endpoint in every fill. Invalid telemetry is
  // never corrected into something plausible; readings beyond 1e300 are valid but passed through
  // too (adding to them could only overflow).
  const bool correctable = scrape.waitingQueueSize >= 0.0 && scrape.waitingQueueSize < 1e300 &&
                           scrape.runningRequests >= 0.0 && scrape.runningRequests < 1e300 &&
                           scrape.kvCacheUsage >= 0.0 && scrape.kvCacheUsage <= 1.0;
  // The only scrape writer from here on (the observed slot count is read and written under it).
  detail::beginWrite(slot);
  std::uint32_t slots = slot.maxRunning.load(std::memory_order_relaxed);
  if (options.slotCountFromScrapes && correctable) {
    const std::uint32_t previous = slot.observedSlots.load(std::memory_order_relaxed);
    const std::uint32_t observed =
        observedSlotsAfter(previous, scrape.waitingQueueSize, scrape.runningRequests);
    if (observed != previous) slot.observedSlots.store(observed, std::memory_order_relaxed);
    if (slots == 0) slots = observed;
  }
  // Budget: free slots (when the slot count is known) + free queue, from the scraped figures.
  std::int32_t budget = 0;
  if (detail::validCount(scrape.waitingQueueSize) && detail::validCount(scrape.runningRequests)) {
    double free = static_cast<double>(options.budgetQueueDepth) - scrape.waitingQueueSize;
    if (free < 0.0) free = 0.0;
    if (slots > 0) {
      const double room = static_cast<double>(slots) - scrape.runningRequests;
      if (room > 0.0) free += room;
    }
    // This replica's share: ceil(free / replicas) (divided here, not in every fill).
    free = std::ceil(std::floor(free) / static_cast<double>(options.replicas));
    budget = static_cast<std::int32_t>(std::min(free, 2147483647.0));
  }
  if (!correctable) budget = kUncorrectable;
  ScrapeMark base = mark;
  if (options.reconcileInFlight && correctable) {
    // Requests in flight at the baseline that the scrape does not show (running + waiting), less
    // the lasting part of that excess (lost completions): still on their way to the server. Move
    // them after the baseline, so that they count as pending (their tokens pro rata), and raise
    // the budget by as many (it counts dispatches since the scrape's own mark).
    const std::int64_t in_flight = since(base.dispatchedRequests, base.completedRequests);
    const double shown = std::floor(scrape.runningRequests + scrape.waitingQueueSize);
    std::uint32_t excess = 0;
    if (shown < static_cast<double>(in_flight)) {  // shown >= 0, so in_flight > 0
      excess = static_cast<std::uint32_t>(
          std::min(static_cast<double>(in_flight) - shown, 4294967295.0));
    }
    // This scrape's excess joins the current stretch of scrape time (its lowest), or opens the
    // next one once kExcessBucketNs have passed since the current one began. A clock that went
    // back stays in the current stretch. Unsigned difference: far-apart times do not overflow.
    const std::int64_t at =
        std::chrono::duration_cast<std::chrono::nanoseconds>(scrape.updateTime.time_since_epoch())
            .count();
    const std::int64_t start = slot.excessBucketStartNs;
    if (start == LedgerSlot::kNoBucket) {
      slot.excess[slot.excessNext] = excess;
      slot.excessBucketStartNs = at;
    } else if (at > start && static_cast<std::uint64_t>(at) - static_cast<std::uint64_t>(start) >=
                                 static_cast<std::uint64_t>(LedgerSlot::kExcessBucketNs)) {
      slot.excessNext = (slot.excessNext + 1) % LedgerSlot::kExcessHistory;
      slot.excess[slot.excessNext] = excess;
      slot.excessBucketStartNs = at;
    } else {
      slot.excess[slot.excessNext] = std::min(slot.excess[slot.excessNext], excess);
    }
    std::uint32_t lasting = excess;
    for (const std::uint32_t x : slot.excess) lasting = std::min(lasting, x);
    const std::int64_t unseen = excess - lasting;
    if (unseen > 0) {
      moveBehindBaseline(base, unseen, in_flight,
                         since(base.dispatchedTokens, base.completedTokens));
      budget = static_cast<std::int32_t>(
          std::min<std::int64_t>(std::int64_t{budget} + unseen, 2147483647));
    }
  }
  slot.updateTimeNs.store(scrape.updateTime.time_since_epoch().count(), std::memory_order_release);
  slot.waiting.store(scrape.waitingQueueSize, std::memory_order_release);
  slot.running.store(scrape.runningRequests, std::memory_order_release);
  slot.kvCacheUsage.store(scrape.kvCacheUsage, std::memory_order_release);
  slot.baseDispatchedRequests.store(base.dispatchedRequests, std::memory_order_release);
  slot.baseDispatchedTokens.store(base.dispatchedTokens, std::memory_order_release);
  slot.baseCompletedRequests.store(base.completedRequests, std::memory_order_release);
  slot.baseCompletedTokens.store(base.completedTokens, std::memory_order_release);
  slot.basePeerDispatchedRequests.store(base.peerDispatchedRequests, std::memory_order_release);
  slot.basePeerDispatchedTokens.store(base.peerDispatchedTokens, std::memory_order_release);
  slot.basePeerCompletedRequests.store(base.peerCompletedRequests, std::memory_order_release);
  slot.basePeerCompletedTokens.store(base.peerCompletedTokens, std::memory_order_release);
  slot.budget.store(budget, std::memory_order_release);
  detail::endWrite(slot);
}

}  // namespace detail

HOLDBACK_INLINE bool DispatchLedger::installScrape(EndpointId id, const Scrape& scrape,
                                                   const ScrapeMark& mark) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;
  detail::storeScrape(*slot, scrape, mark, options_);
  return true;
}

HOLDBACK_INLINE bool DispatchLedger::installScrape(EndpointId id, const Scrape& scrape) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;
  ScrapeMark base = detail::readAllCounters(*slot);
  const std::int64_t margin = options_.scrapeMarginRequests;
  if (margin > 0) {
    const detail::ScrapeView previous = detail::readScrape(*slot);
    const ScrapeMark& prev = previous.base;  // zeros before the first scrape
    const std::int64_t since_prev = detail::since(base.dispatchedRequests, prev.dispatchedRequests);
    const std::int64_t back = std::clamp<std::int64_t>(since_prev, 0, margin);
    if (back > 0) {
      detail::moveBehindBaseline(base, back, since_prev,
                                 detail::since(base.dispatchedTokens, prev.dispatchedTokens));
    }
  }
  detail::storeScrape(*slot, scrape, base, options_);
  return true;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
