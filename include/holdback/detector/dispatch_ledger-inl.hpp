// Implementation of holdback/detector/dispatch_ledger.hpp: compiled into libholdback by
// src/detector.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/detector/dispatch_ledger.hpp"

#include <algorithm>
#include <cmath>
#include <new>

#include "holdback/core/text.hpp"

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

HOLDBACK_INLINE DispatchLedger::DispatchLedger(DispatchLedgerOptions options) noexcept
    : options_(options) {
  if (options_.scrapeMarginRequests < 0) options_.scrapeMarginRequests = 0;
  if (options_.budgetQueueDepth <= 0) options_.budgetQueueDepth = 1;
  options_.replicas = std::clamp<std::int64_t>(options_.replicas, 1, options_.kMaxReplicas);
}

HOLDBACK_INLINE DispatchLedger::~DispatchLedger() {
  for (auto& chunk : chunks_) delete chunk.load(std::memory_order_relaxed);
}

HOLDBACK_INLINE void DispatchLedger::validate(const DispatchLedgerOptions& options,
                                              const std::string& path, Diagnostics& diagnostics) {
  if (options.scrapeMarginRequests < 0) {
    diagnostics.error(
        joinPath(path, "scrapeMarginRequests"),
        std::to_string(options.scrapeMarginRequests) + " is negative; expected an integer >= 0");
  }
  if (options.replicas < 1 || options.replicas > options.kMaxReplicas) {
    diagnostics.error(joinPath(path, "replicas"),
                      std::to_string(options.replicas) +
                          " is out of range; expected an integer in [1, " +
                          std::to_string(options.kMaxReplicas) + "]");
  }
  if (options.budgetQueueDepth <= 0) {
    diagnostics.error(joinPath(path, "budgetQueueDepth"),
                      std::to_string(options.budgetQueueDepth) +
                          " is not strictly positive; expected an integer > 0");
  }
}

// Always inlined: every event and every endpoint of a fill goes through it (out of line it was
// 10 % of BM_LedgerFill/1024). Private, so only this file's definitions call it.
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

HOLDBACK_INLINE std::optional<std::uint32_t> DispatchLedger::indexOf(
    std::string_view name) const noexcept {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

HOLDBACK_INLINE EndpointId DispatchLedger::registerEndpoint(
    std::string_view name, std::optional<EndpointCapacity> capacity) noexcept {
  HOLDBACK_TRY {
    std::unique_lock lock(registry_mutex_);
    if (const auto index = indexOf(name)) {
      detail::LedgerSlot& slot = (*chunks_[*index / kChunkSize].load())[*index % kChunkSize];
      const EndpointId id{*index, slot.generation.load(std::memory_order_relaxed)};
      if (capacity) setCapacity(id, *capacity);
      return id;
    }
    // A drained retired slot, else a new one.
    std::optional<std::uint32_t> index;
    for (std::size_t i = 0; i < retired_.size(); ++i) {
      const std::uint32_t r = retired_[i];
      const detail::LedgerSlot& slot = (*chunks_[r / kChunkSize].load())[r % kChunkSize];
      const ScrapeMark c = detail::readCounters(slot);
      if (c.completedRequests == c.dispatchedRequests) {
        index = r;
        retired_[i] = retired_.back();
        retired_.pop_back();
        break;
      }
    }
    if (!index) {
      if (slots_used_ >= kMaxEndpoints) return {};
      const std::uint32_t next = slots_used_;
      auto& chunk = chunks_[next / kChunkSize];
      if (chunk.load(std::memory_order_relaxed) == nullptr) {
        chunk.store(new Chunk(), std::memory_order_release);
      }
      ++slots_used_;
      index = next;
    }
    // Allocate first: if that fails the slot stays unused.
    if (names_.size() <= *index) names_.resize(*index + 1);
    names_[*index].assign(name.data(), name.size());
    by_name_.emplace(names_[*index], *index);
    detail::LedgerSlot& slot = (*chunks_[*index / kChunkSize].load())[*index % kChunkSize];
    // A reused slot starts at zero in flight: tokens that handle-free completions left open
    // (no request is outstanding any more) are written off.
    slot.completedTokens.store(slot.dispatchedTokens.load(std::memory_order_relaxed),
                               std::memory_order_release);
    detail::beginWrite(slot);
    slot.budget.store(detail::kNoScrape, std::memory_order_release);
    slot.observedSlots.store(0, std::memory_order_relaxed);  // a new server proves itself again
    slot.excess = {};
    slot.excessNext = 0;
    slot.excessBucketStartNs = detail::LedgerSlot::kNoBucket;
    slot.peerRequests.store(-1, std::memory_order_relaxed);  // no replica sync yet
    slot.peerTokens.store(0, std::memory_order_relaxed);
    slot.peerReplicas.store(0, std::memory_order_relaxed);
    detail::endWrite(slot);
    const EndpointCapacity cap = capacity.value_or(EndpointCapacity{});
    slot.maxRunning.store(detail::slotCount(cap.maxRunningRequests), std::memory_order_relaxed);
    slot.kvPerToken.store(detail::perToken(cap.kvCapacityTokens), std::memory_order_relaxed);
    const std::uint32_t generation = slot.generation.load(std::memory_order_relaxed) + 1;
    slot.generation.store(generation, std::memory_order_release);
    return {*index, generation};
  }
  HOLDBACK_CATCH_ALL {
    return {};
  }
}

HOLDBACK_INLINE std::optional<EndpointId> DispatchLedger::find(
    std::string_view name) const noexcept {
  std::shared_lock lock(registry_mutex_);
  const auto index = indexOf(name);
  if (!index) return std::nullopt;
  const detail::LedgerSlot& slot = (*chunks_[*index / kChunkSize].load())[*index % kChunkSize];
  return EndpointId{*index, slot.generation.load(std::memory_order_relaxed)};
}

HOLDBACK_INLINE bool DispatchLedger::setCapacity(EndpointId id,
                                                 EndpointCapacity capacity) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;
  slot->maxRunning.store(detail::slotCount(capacity.maxRunningRequests), std::memory_order_relaxed);
  slot->kvPerToken.store(detail::perToken(capacity.kvCapacityTokens), std::memory_order_relaxed);
  return true;
}

HOLDBACK_INLINE bool DispatchLedger::removeEndpoint(EndpointId id) noexcept {
  std::unique_lock lock(registry_mutex_);
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;  // slotOf only returns live slots (odd generation)
  slot->generation.store(id.generation + 1, std::memory_order_release);
  by_name_.erase(names_[id.index]);
  HOLDBACK_TRY {
    retired_.push_back(id.index);
  }
  HOLDBACK_CATCH_ALL {
    // The slot is simply never reused.
  }
  return true;
}

HOLDBACK_INLINE bool DispatchLedger::removeEndpoint(std::string_view name) noexcept {
  const auto id = find(name);
  return id && removeEndpoint(*id);
}

HOLDBACK_INLINE DispatchHandle DispatchLedger::dispatch(EndpointId id,
                                                        std::int64_t tokens) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return {};
  tokens = detail::clampTokens(tokens);
  slot->dispatchedRequests.fetch_add(1, std::memory_order_relaxed);
  if (tokens != 0) {
    slot->dispatchedTokens.fetch_add(static_cast<std::uint64_t>(tokens), std::memory_order_release);
  }
  return DispatchHandle(slot, tokens);
}

HOLDBACK_INLINE bool DispatchLedger::recordDispatch(EndpointId id, std::int64_t tokens) noexcept {
  DispatchHandle handle = dispatch(id, tokens);
  const bool counted = handle.active();
  handle.slot_ = nullptr;  // the host completes it with recordCompletion
  return counted;
}

HOLDBACK_INLINE bool DispatchLedger::recordCompletion(EndpointId id, std::int64_t tokens) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;
  // At most as many completions as dispatches; tokens likewise. The completed count is read
  // before the dispatched one (acquire), so every completion seen has its dispatch seen too.
  constexpr auto kAcquire = std::memory_order_acquire;
  for (;;) {
    std::uint64_t completed = slot->completedRequests.load(kAcquire);
    const std::uint64_t dispatched = slot->dispatchedRequests.load(kAcquire);
    if (detail::since(dispatched, completed) <= 0) return false;
    if (slot->completedRequests.compare_exchange_weak(completed, completed + 1,
                                                      std::memory_order_acq_rel, kAcquire)) {
      break;
    }
  }
  tokens = detail::clampTokens(tokens);
  while (tokens != 0) {
    std::uint64_t done = slot->completedTokens.load(kAcquire);
    const std::int64_t open = detail::since(slot->dispatchedTokens.load(kAcquire), done);
    if (open <= 0) break;
    const std::uint64_t next = done + static_cast<std::uint64_t>(std::min(open, tokens));
    if (slot->completedTokens.compare_exchange_weak(done, next, std::memory_order_acq_rel,
                                                    kAcquire)) {
      break;
    }
  }
  return true;
}

HOLDBACK_INLINE ScrapeMark DispatchLedger::mark(EndpointId id) const noexcept {
  const detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return {};
  return detail::readCounters(*slot);
}

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
  ScrapeMark base = detail::readCounters(*slot);
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

HOLDBACK_INLINE InFlightLoad DispatchLedger::load(EndpointId id) const noexcept {
  const detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return {};
  const ScrapeMark c = detail::readCounters(*slot);
  return {std::max<std::int64_t>(0, detail::since(c.dispatchedRequests, c.completedRequests)),
          std::max<std::int64_t>(0, detail::since(c.dispatchedTokens, c.completedTokens))};
}

HOLDBACK_INLINE InFlightLoad DispatchLedger::load(std::string_view name) const noexcept {
  const auto id = find(name);
  return id ? load(*id) : InFlightLoad{};
}

HOLDBACK_INLINE std::optional<DispatchLedger::BudgetState> DispatchLedger::budgetState(
    EndpointId id) const noexcept {
  const detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return std::nullopt;
  const detail::ScrapeView v = detail::readScrape(*slot);
  if (!v.has) return std::nullopt;
  const ScrapeMark c = detail::readCounters(*slot);
  return BudgetState{
      std::max<std::int64_t>(0, detail::since(c.dispatchedRequests, v.base.dispatchedRequests)),
      std::max<std::int64_t>(0, v.budget)};
}

HOLDBACK_INLINE InFlightLoad DispatchLedger::localPending(EndpointId id) const noexcept {
  const detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return {};
  const detail::ScrapeView v = detail::readScrape(*slot);
  if (!v.has) return {};
  const ScrapeMark c = detail::readCounters(*slot);
  return {
      std::max<std::int64_t>(0, detail::since(c.dispatchedRequests, v.base.dispatchedRequests) -
                                    detail::since(c.completedRequests, v.base.completedRequests)),
      std::max<std::int64_t>(0, detail::since(c.dispatchedTokens, v.base.dispatchedTokens) -
                                    detail::since(c.completedTokens, v.base.completedTokens))};
}

HOLDBACK_INLINE bool DispatchLedger::setPeerPending(EndpointId id,
                                                    std::optional<InFlightLoad> others,
                                                    std::int64_t replicas) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;
  const auto r = static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(replicas, 0, DispatchLedgerOptions::kMaxReplicas));
  slot->peerReplicas.store(r, std::memory_order_relaxed);
  if (!others) {
    slot->peerRequests.store(-1, std::memory_order_relaxed);
    return true;
  }
  const std::int64_t cap = kMaxTokensPerRequest;
  slot->peerTokens.store(std::clamp<std::int64_t>(others->tokens, 0, cap),
                         std::memory_order_relaxed);
  slot->peerRequests.store(std::clamp<std::int64_t>(others->requests, 0, cap),
                           std::memory_order_relaxed);
  return true;
}

HOLDBACK_INLINE std::int64_t DispatchLedger::slotCount(EndpointId id) const noexcept {
  const detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return 0;
  return detail::slotsInUse(*slot);
}

namespace detail {

// fill's figures for one endpoint from a consistent read of its slot (see "The algorithm").
[[gnu::always_inline]] inline void fillFrom(Endpoint& e, const LedgerSlot& slotRef,
                                            const ScrapeView& v, const ScrapeMark& c,
                                            const DispatchLedgerOptions& options) noexcept {
  const LedgerSlot* slot = &slotRef;
  e.maxRunningRequests = slotsInUse(*slot);
  const double capacity_per_token = slot->kvPerToken.load(std::memory_order_relaxed);
  e.kvCapacityTokens =
      capacity_per_token > 0.0 ? std::llround(1.0 / capacity_per_token) : std::int64_t{0};
  e.inFlightRequests = std::max<std::int64_t>(0, since(c.dispatchedRequests, c.completedRequests));
  e.inFlightTokens = std::max<std::int64_t>(0, since(c.dispatchedTokens, c.completedTokens));
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
    const std::int64_t pending = since(c.dispatchedRequests, v.base.dispatchedRequests) -
                                 since(c.completedRequests, v.base.completedRequests);
    // Each replica's own pending work, times the replicas (see DispatchLedgerOptions::replicas),
    // or with replica sync (setPeerPending) its own plus the other replicas' reported sum.
    const std::int64_t peer_requests = slot->peerRequests.load(std::memory_order_relaxed);
    const std::uint32_t peer_replicas = slot->peerReplicas.load(std::memory_order_relaxed);
    const auto replicas = static_cast<double>(
        peer_replicas > options.replicas ? std::int64_t{peer_replicas} : options.replicas);
    const bool synced = peer_requests >= 0;
    const double own_pending = static_cast<double>(pending > 0 ? pending : 0);
    // The others' reported sum, but never less than the share would count for them: between two
    // syncs their new dispatches are not in the sum yet.
    const double share_of_others = own_pending * (replicas - 1.0);
    const double reported = synced ? static_cast<double>(peer_requests) : 0.0;
    const double peers = reported > share_of_others ? reported : share_of_others;
    if (synced ? own_pending + peers > 0.0 : pending > 0) {
      const double p = synced ? own_pending + peers : static_cast<double>(pending) * replicas;
      const std::uint32_t slots = slotsInUse(*slot);
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
    const std::int64_t pending_tokens = since(c.dispatchedTokens, v.base.dispatchedTokens) -
                                        since(c.completedTokens, v.base.completedTokens);
    const double own_tokens = static_cast<double>(pending_tokens > 0 ? pending_tokens : 0);
    const double reported_tokens =
        static_cast<double>(slot->peerTokens.load(std::memory_order_relaxed));
    const double tokens_total = synced
                                    ? own_tokens + (reported_tokens > own_tokens * (replicas - 1.0)
                                                        ? reported_tokens
                                                        : own_tokens * (replicas - 1.0))
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
                                        const DispatchLedgerOptions& options) noexcept {
  const ScrapeView v = readScrape(slot);
  const ScrapeMark c = readCounters(slot);
  fillFrom(e, slot, v, c, options);
}

}  // namespace detail

// Always inlined into the fill loops (only they call it).
[[gnu::always_inline]] inline void DispatchLedger::fillOne(
    Endpoint& e, const detail::LedgerSlot* slot, const DispatchLedgerOptions& options) noexcept {
  if (slot == nullptr) {
    detail::clearTelemetry(e);
    return;
  }
  detail::ScrapeView v;
  ScrapeMark c;
  if (!detail::tryReadScrape(*slot, v) || !detail::tryReadCounters(*slot, c)) [[unlikely]] {
    detail::fillRetry(e, *slot, options);
    return;
  }
  detail::fillFrom(e, *slot, v, c, options);
}

HOLDBACK_INLINE void DispatchLedger::fill(std::span<Endpoint> endpoints,
                                          std::span<const EndpointId> ids) const noexcept {
  const std::size_t n = std::min(endpoints.size(), ids.size());
  const DispatchLedgerOptions options = options_;  // kept in registers across the atomics
  for (std::size_t k = 0; k < n; ++k) {
    fillOne(endpoints[k], slotOf(ids[k]), options);
  }
}

HOLDBACK_INLINE void DispatchLedger::fill(std::span<Endpoint> endpoints) const noexcept {
  std::shared_lock lock(registry_mutex_);
  for (Endpoint& e : endpoints) {
    const auto index = indexOf(e.name);
    fillOne(
        e,
        index
            ? &(*chunks_[*index / kChunkSize].load(std::memory_order_acquire))[*index % kChunkSize]
            : nullptr,
        options_);
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
    const detail::LedgerSlot& slot =
        (*chunks_[*index / kChunkSize].load(std::memory_order_acquire))[*index % kChunkSize];
    const ScrapeMark c = detail::readCounters(slot);
    e.inFlightRequests =
        std::max<std::int64_t>(0, detail::since(c.dispatchedRequests, c.completedRequests));
    e.inFlightTokens =
        std::max<std::int64_t>(0, detail::since(c.dispatchedTokens, c.completedTokens));
  }
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
