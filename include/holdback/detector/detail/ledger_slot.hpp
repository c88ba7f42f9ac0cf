// detail::LedgerSlot: one endpoint's storage in a DispatchLedger (detector/dispatch_ledger.hpp):
// its event counters, its installed scrape under a sequence lock, and the replica figures, on
// cache lines of their own by writer. Internal; the access functions are in ledger_slot-inl.hpp.
//
// Thread safety: every field is an atomic, written and read as the comments say; the scrape's
// fields only under its sequence lock (ledger_slot-inl.hpp: beginWrite, endWrite, tryReadScrape).
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// Two cache lines per endpoint: the event counters (with the read-mostly capacity and the token
// baselines), and the scrape under its sequence lock.
struct alignas(64) LedgerSlot {
  std::atomic<std::uint64_t> dispatchedRequests{0};
  std::atomic<std::uint64_t> dispatchedTokens{0};
  std::atomic<std::uint64_t> completedRequests{0};
  std::atomic<std::uint64_t> completedTokens{0};
  // maxRunningRequests (capped at kMaxConfiguredSlots); 0 = not configured.
  std::atomic<std::uint32_t> maxRunning{0};
  // The observed slot count (DispatchLedgerOptions::slotCountFromScrapes); 0 = none yet. Written
  // under `sequence` by the scrape writer, read without it by fill.
  std::atomic<std::uint32_t> observedSlots{0};
  std::atomic<double> kvPerToken{0.0};                 // 1 / kvCapacityTokens; 0 = unknown
  std::atomic<std::uint64_t> baseDispatchedTokens{0};  // under `sequence`
  std::atomic<std::uint64_t> baseCompletedTokens{0};   // under `sequence`
  // The last scrape and its baseline, published under `sequence` (odd while being written).
  alignas(64) std::atomic<std::uint64_t> sequence{0};
  std::atomic<std::int64_t> updateTimeNs{0};
  std::atomic<double> waiting{0.0};
  std::atomic<double> running{0.0};
  std::atomic<double> kvCacheUsage{0.0};
  std::atomic<std::uint64_t> baseDispatchedRequests{0};
  std::atomic<std::uint64_t> baseCompletedRequests{0};
  // The budget; -1: no scrape installed, -2: the scrape is not correctable (see -inl.hpp).
  std::atomic<std::int32_t> budget{-1};
  // Odd while the slot is live (registration and removal each add one).
  std::atomic<std::uint32_t> generation{0};
  // Reconciliation's memory (DispatchLedgerOptions::reconcileInFlight): the lowest in-flight
  // excess over the scraped intake in each of the last kExcessHistory stretches of scrape time
  // (kExcessBucketNs each; the last one still filling), a ring. Read and written only by the
  // scrape writer (under `sequence`), never by fill or dispatch: a line of its own.
  static constexpr std::size_t kExcessHistory = 4;
  static constexpr std::int64_t kExcessBucketNs = 250'000'000;
  static constexpr std::int64_t kNoBucket = INT64_MIN;
  alignas(64) std::array<std::uint32_t, kExcessHistory> excess{};
  std::uint32_t excessNext = 0;
  std::int64_t excessBucketStartNs = kNoBucket;  // the scrape time the current stretch began
  // Replica sync (setPeerPending, replica_sync.hpp): the other replicas' pending requests and
  // tokens (-1 requests: none, the `replicas` share applies), the replicas last seen live (0:
  // unknown) and this replica's rank among them (-1: none, the free room is not split). Written
  // by the host's sync thread, read by fill (only these and `index`, on this line).
  std::atomic<std::int64_t> peerRequests{-1};
  std::atomic<std::int64_t> peerTokens{0};
  std::atomic<std::uint16_t> peerReplicas{0};  // <= DispatchLedgerOptions::kMaxReplicas
  std::atomic<std::int16_t> peerRank{-1};
  // This replica's dispatch counters (their low 32 bits) when the others' figures were
  // installed: its dispatches since then stand for theirs, which the figures do not hold yet.
  std::atomic<std::uint32_t> syncDispatchedRequests{0};
  std::atomic<std::uint32_t> syncDispatchedTokens{0};
  // The slot's index (its EndpointId's), for the free room split's turn. Written at
  // registration, read by fill.
  std::atomic<std::uint32_t> index{0};
  // The replica feed (recordPeerDispatch, recordPeerCompletion): the other replicas' events as
  // the host's feed delivers them, and their baseline (written under `sequence`). Touched only
  // when the host runs a feed: fill reads this line only while the feed is live.
  alignas(64) std::atomic<std::uint64_t> peerDispatchedRequests{0};
  std::atomic<std::uint64_t> peerDispatchedTokens{0};
  std::atomic<std::uint64_t> peerCompletedRequests{0};
  std::atomic<std::uint64_t> peerCompletedTokens{0};
  std::atomic<std::uint64_t> basePeerDispatchedRequests{0};
  std::atomic<std::uint64_t> basePeerDispatchedTokens{0};
  std::atomic<std::uint64_t> basePeerCompletedRequests{0};
  std::atomic<std::uint64_t> basePeerCompletedTokens{0};
};
static_assert(sizeof(LedgerSlot) == 256,
              "two hot cache lines per endpoint, one for the scrape writer alone, one for the "
              "replica feed");

struct TransparentStringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

}  // namespace detail

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
