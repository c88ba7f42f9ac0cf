// Implementation of holdback/detector/detail/ledger_slot.hpp, the slot access every other part of
// the ledger uses: counter arithmetic, the consistent reads of a slot's counters and of its
// installed scrape (sequence lock), the scrape writer's side of that lock, and
// DispatchLedger::slotOf. Included by dispatch_ledger-inl.hpp and the other
// detector/detail/ledger_*-inl.hpp files.
#pragma once

#include "holdback/detector/dispatch_ledger.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// a - b of two monotonic counters, modulo 2^64, read as a signed count.
[[nodiscard]] inline std::int64_t since(std::uint64_t a, std::uint64_t b) noexcept {
  return static_cast<std::int64_t>(a - b);
}

[[nodiscard]] inline std::int64_t clampTokens(std::int64_t tokens) noexcept {
  if (tokens < 0) return 0;
  return tokens > DispatchLedger::kMaxTokensPerRequest ? DispatchLedger::kMaxTokensPerRequest
                                                       : tokens;
}

[[nodiscard]] inline bool validCount(double v) noexcept {
  return v >= 0.0 && v <= std::numeric_limits<double>::max();  // false for NaN, inf, negative
}

// maxRunningRequests as stored: <= 0 = unknown = 0, capped at kMaxConfiguredSlots.
[[nodiscard]] inline std::uint32_t slotCount(std::int64_t maxRunningRequests) noexcept {
  if (maxRunningRequests <= 0) return 0;
  return static_cast<std::uint32_t>(
      std::min(maxRunningRequests, DispatchLedger::kMaxConfiguredSlots));
}

// The observed slot count after a scrape of `waiting` and `running` (both valid, below 1e300)
// over `previous` (see "The observed slot count" in the header): raised to the running figure,
// or restarted from it when the scrape shows a queue; capped at kMaxObservedSlots.
[[nodiscard]] inline std::uint32_t observedSlotsAfter(std::uint32_t previous, double waiting,
                                                      double running) noexcept {
  constexpr auto kCap = static_cast<double>(DispatchLedger::kMaxObservedSlots);
  const auto shown = static_cast<std::uint32_t>(std::floor(running < kCap ? running : kCap));
  if (waiting > 0.0) return shown;
  return shown > previous ? shown : previous;
}

// The slot count fill and slotCount(id) use: the configured one, else the observed one (0 until
// a scrape has shown running work, and always 0 without slotCountFromScrapes).
[[nodiscard]] inline std::uint32_t slotsInUse(const LedgerSlot& slot) noexcept {
  const std::uint32_t configured = slot.maxRunning.load(std::memory_order_relaxed);
  return configured != 0 ? configured : slot.observedSlots.load(std::memory_order_relaxed);
}

// The KV fraction of one token of a capacity of `tokens` (0 = unknown).
[[nodiscard]] inline double perToken(std::int64_t tokens) noexcept {
  return tokens > 0 ? 1.0 / static_cast<double>(tokens) : 0.0;
}

// The four counters at one instant. A dispatch adds its request, then its tokens (release); a
// release() completes the tokens, then the request (both release). Reading the dispatched
// requests before and after the completions and the dispatched tokens, all acquire: when the two
// request counts agree, every completion read belongs to a dispatch read, and so do the tokens.
// A few retries under a storm of dispatches; then the later counts are used (in flight then
// includes dispatches made during the read: it errs high, never negative).
//
// One attempt; false when a dispatch raced with the read.
[[gnu::always_inline]] inline bool tryReadCounters(const LedgerSlot& s, ScrapeMark& m) noexcept {
  constexpr auto kAcquire = std::memory_order_acquire;
  const std::uint64_t requests = s.dispatchedRequests.load(kAcquire);
  m.completedRequests = s.completedRequests.load(kAcquire);
  m.completedTokens = s.completedTokens.load(kAcquire);
  m.dispatchedTokens = s.dispatchedTokens.load(kAcquire);
  m.dispatchedRequests = s.dispatchedRequests.load(kAcquire);
  return m.dispatchedRequests == requests;
}

[[nodiscard]] inline ScrapeMark readCounters(const LedgerSlot& s) noexcept {
  ScrapeMark m;
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (tryReadCounters(s, m)) break;
  }
  return m;
}

// The replica feed's counters into `m` (completions first: a completion read has its dispatch
// read too when the feed delivered them in order).
inline void readPeerCounters(const LedgerSlot& s, ScrapeMark& m) noexcept {
  constexpr auto kAcquire = std::memory_order_acquire;
  m.peerCompletedRequests = s.peerCompletedRequests.load(kAcquire);
  m.peerCompletedTokens = s.peerCompletedTokens.load(kAcquire);
  m.peerDispatchedRequests = s.peerDispatchedRequests.load(kAcquire);
  m.peerDispatchedTokens = s.peerDispatchedTokens.load(kAcquire);
}

// The counters with the feed's: what mark() returns and a baseline takes.
[[nodiscard]] inline ScrapeMark readAllCounters(const LedgerSlot& s) noexcept {
  ScrapeMark m = readCounters(s);
  readPeerCounters(s, m);
  return m;
}

// LedgerSlot::budget sentinels: no scrape installed yet; a scrape whose telemetry is not
// correctable (invalid or beyond 1e300: fill passes it through). Values >= 0 are budgets.
inline constexpr std::int32_t kNoScrape = -1;
inline constexpr std::int32_t kUncorrectable = -2;

struct ScrapeView {
  bool has = false;
  bool correctable = false;  // see kUncorrectable
  std::int64_t updateTimeNs = 0;
  double waiting = 0.0;
  double running = 0.0;
  double kv = 0.0;
  ScrapeMark base;
  std::int64_t budget = 0;
};

// Sequence-lock read; retries while a writer is active or the sequence moved. The field loads
// are acquire, so the second sequence load cannot move before them (no fence needed: free on
// x86, and ThreadSanitizer models it).
// One attempt; false while a writer is active or when the sequence moved.
[[gnu::always_inline]] inline bool tryReadScrape(const LedgerSlot& s, ScrapeView& v) noexcept {
  constexpr auto kAcquire = std::memory_order_acquire;
  const std::uint64_t before = s.sequence.load(kAcquire);
  v.updateTimeNs = s.updateTimeNs.load(kAcquire);
  v.waiting = s.waiting.load(kAcquire);
  v.running = s.running.load(kAcquire);
  v.kv = s.kvCacheUsage.load(kAcquire);
  v.base.dispatchedRequests = s.baseDispatchedRequests.load(kAcquire);
  v.base.dispatchedTokens = s.baseDispatchedTokens.load(kAcquire);
  v.base.completedRequests = s.baseCompletedRequests.load(kAcquire);
  v.base.completedTokens = s.baseCompletedTokens.load(kAcquire);
  v.base.peerDispatchedRequests = s.basePeerDispatchedRequests.load(kAcquire);
  v.base.peerDispatchedTokens = s.basePeerDispatchedTokens.load(kAcquire);
  v.base.peerCompletedRequests = s.basePeerCompletedRequests.load(kAcquire);
  v.base.peerCompletedTokens = s.basePeerCompletedTokens.load(kAcquire);
  v.budget = s.budget.load(kAcquire);
  v.has = v.budget != kNoScrape;
  v.correctable = v.budget >= 0;
  return (before & 1U) == 0 && s.sequence.load(std::memory_order_relaxed) == before;
}

[[nodiscard]] inline ScrapeView readScrape(const LedgerSlot& s) noexcept {
  ScrapeView v;
  while (!tryReadScrape(s, v)) {
  }
  return v;
}

// Becomes the slot's only scrape writer (writers are rare: spin). The field stores that follow
// are release stores, so none becomes visible before the odd sequence.
inline void beginWrite(LedgerSlot& s) noexcept {
  std::uint64_t seq = s.sequence.load(std::memory_order_relaxed);
  for (;;) {
    if ((seq & 1U) == 0 && s.sequence.compare_exchange_weak(seq, seq + 1, std::memory_order_acq_rel,
                                                            std::memory_order_relaxed)) {
      return;
    }
    seq = s.sequence.load(std::memory_order_relaxed);
  }
}

inline void endWrite(LedgerSlot& s) noexcept {
  s.sequence.fetch_add(1, std::memory_order_release);
}

inline void clearTelemetry(Endpoint& e) noexcept {
  e.updateTime.reset();
  e.waitingQueueSize = 0.0;
  e.runningRequests = 0.0;
  e.kvCacheUsage = 0.0;
  e.inFlightRequests = 0;
  e.inFlightTokens = 0;
  e.maxRunningRequests = 0;
  e.kvCapacityTokens = 0;
}

}  // namespace detail

// Always inlined: every event and every endpoint of a fill goes through it (out of line it was
// 10 % of BM_LedgerFill/1024). Private, so only the ledger's implementation files call it.
[[gnu::always_inline]] inline detail::LedgerSlot* DispatchLedger::slotOf(
    EndpointId id) const noexcept {
  // Live generations are odd (registration and removal each add one); 0 is never handed out.
  if (id.index >= kMaxEndpoints || (id.generation & 1U) == 0) return nullptr;
  Chunk* chunk = chunks_[id.index / kChunkSize].load(std::memory_order_acquire);
  if (chunk == nullptr) return nullptr;
  detail::LedgerSlot& slot = (*chunk)[id.index % kChunkSize];
  if (slot.generation.load(std::memory_order_acquire) != id.generation) return nullptr;
  return &slot;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
