// Implementation of holdback/detector/dispatch_ledger.hpp: compiled into libholdback by
// src/detector.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
// Registration, dispatch and completion, the queries and the replica sync seam here; the slot
// access, scrape installation and fill in detector/detail/ledger_{slot,scrape,fill}-inl.hpp.
#pragma once

#include "holdback/detector/dispatch_ledger.hpp"

#include <algorithm>
#include <cmath>
#include <new>

#include "holdback/core/text.hpp"
#include "holdback/detector/detail/dispatch_ledger_fields.hpp"
#include "holdback/detector/detail/ledger_fill-inl.hpp"
#include "holdback/detector/detail/ledger_levels-inl.hpp"
#include "holdback/detector/detail/ledger_scrape-inl.hpp"
#include "holdback/detector/detail/ledger_slot-inl.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE DispatchLedger::DispatchLedger(DispatchLedgerOptions options) noexcept
    : options_(std::move(options)) {
  if (options_.scrapeMarginRequests < 0) options_.scrapeMarginRequests = 0;
  if (options_.budgetQueueDepth <= 0) options_.budgetQueueDepth = 1;
  options_.replicas = std::clamp<std::int64_t>(options_.replicas, 1, options_.kMaxReplicas);
  options_.sharedRoomSlots =
      std::clamp<std::int64_t>(options_.sharedRoomSlots, 0, kMaxConfiguredSlots);
  std::vector<Priority>& levels = options_.priorityLevels;  // sorted, unique: no allocation
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  if (levels.size() > DispatchLedgerOptions::kMaxPriorityLevels) {
    levels.erase(levels.begin() + DispatchLedgerOptions::kMaxPriorityLevels, levels.end());
  }
}

HOLDBACK_INLINE DispatchLedger::~DispatchLedger() {
  for (auto& chunk : chunks_) delete chunk.load(std::memory_order_relaxed);
  for (auto& levels : level_chunks_) delete[] levels.load(std::memory_order_relaxed);
}

HOLDBACK_INLINE void DispatchLedger::validate(const DispatchLedgerOptions& options,
                                              const std::string& path, Diagnostics& diagnostics) {
  checkFields<DispatchLedgerOptions>(kDispatchLedgerFields, options, path, diagnostics);
  if (options.sharedRoomSlots < 0) {
    diagnostics.error(
        joinPath(path, "sharedRoomSlots"),
        std::to_string(options.sharedRoomSlots) + " is negative; expected an integer >= 0");
  }
}

HOLDBACK_INLINE std::optional<std::uint32_t> DispatchLedger::indexOf(
    std::string_view name) const noexcept {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

HOLDBACK_INLINE detail::LedgerSlot& DispatchLedger::slotAt(std::uint32_t index) const noexcept {
  return (*chunks_[index / kChunkSize].load(std::memory_order_acquire))[index % kChunkSize];
}

HOLDBACK_INLINE EndpointId DispatchLedger::registerEndpoint(
    std::string_view name, std::optional<EndpointCapacity> capacity) noexcept {
  HOLDBACK_TRY {
    std::unique_lock lock(registry_mutex_);
    if (const auto index = indexOf(name)) {
      const EndpointId id{*index, slotAt(*index).generation.load(std::memory_order_relaxed)};
      if (capacity) setCapacity(id, *capacity);
      return id;
    }
    // A drained retired slot, else a new one.
    std::optional<std::uint32_t> index;
    for (std::size_t i = 0; i < retired_.size(); ++i) {
      const std::uint32_t r = retired_[i];
      const ScrapeMark c = detail::readCounters(slotAt(r));
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
        const std::size_t levels = options_.priorityLevels.size();
        auto& level_chunk = level_chunks_[next / kChunkSize];
        if (levels != 0 && level_chunk.load(std::memory_order_relaxed) == nullptr) {
          level_chunk.store(new detail::LevelCount[kChunkSize * levels](),
                            std::memory_order_release);
        }
        chunk.store(new Chunk(), std::memory_order_release);
      }
      ++slots_used_;
      index = next;
    }
    // Allocate first: if that fails the slot stays unused.
    if (names_.size() <= *index) names_.resize(*index + 1);
    names_[*index].assign(name.data(), name.size());
    by_name_.emplace(names_[*index], *index);
    detail::LedgerSlot& slot = slotAt(*index);
    // A reused slot starts at zero in flight: tokens that handle-free completions left open
    // (no request is outstanding any more) are written off.
    slot.completedTokens.store(slot.dispatchedTokens.load(std::memory_order_relaxed),
                               std::memory_order_release);
    if (detail::LevelCount* levels = levelsAt(*index)) {
      for (std::size_t l = 0; l < options_.priorityLevels.size(); ++l) {
        detail::LevelCount& c = levels[l];  // likewise for handle-free completions per level
        c.completed.store(c.dispatched.load(std::memory_order_relaxed), std::memory_order_release);
      }
    }
    detail::beginWrite(slot);
    slot.budget.store(detail::kNoScrape, std::memory_order_release);
    slot.observedSlots.store(0, std::memory_order_relaxed);  // a new server proves itself again
    slot.excess = {};
    slot.excessNext = 0;
    slot.excessBucketStartNs = detail::LedgerSlot::kNoBucket;
    slot.peerRequests.store(-1, std::memory_order_relaxed);  // no replica sync yet
    slot.peerTokens.store(0, std::memory_order_relaxed);
    slot.peerReplicas.store(0, std::memory_order_relaxed);
    slot.peerRank.store(-1, std::memory_order_relaxed);
    slot.index.store(*index, std::memory_order_relaxed);
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
  return EndpointId{*index, slotAt(*index).generation.load(std::memory_order_relaxed)};
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
  return DispatchHandle(slot, nullptr, tokens);
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
  return detail::readAllCounters(*slot);
}

namespace detail {
// One replica feed event into a pair of the slot's counters: its tokens, then its request.
inline void countPeerEvent(std::atomic<std::uint64_t>& requests, std::atomic<std::uint64_t>& tokens,
                           std::int64_t count) noexcept {
  tokens.fetch_add(static_cast<std::uint64_t>(clampTokens(count)), std::memory_order_release);
  requests.fetch_add(1, std::memory_order_release);
}
}  // namespace detail

HOLDBACK_INLINE bool DispatchLedger::recordPeerDispatch(EndpointId id,
                                                        std::int64_t tokens) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;
  detail::countPeerEvent(slot->peerDispatchedRequests, slot->peerDispatchedTokens, tokens);
  return true;
}

HOLDBACK_INLINE bool DispatchLedger::recordPeerCompletion(EndpointId id,
                                                          std::int64_t tokens) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;
  detail::countPeerEvent(slot->peerCompletedRequests, slot->peerCompletedTokens, tokens);
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
                                                    std::int64_t replicas,
                                                    std::int64_t rank) noexcept {
  detail::LedgerSlot* slot = slotOf(id);
  if (slot == nullptr) return false;
  const auto r = static_cast<std::uint16_t>(
      std::clamp<std::int64_t>(replicas, 0, DispatchLedgerOptions::kMaxReplicas));
  slot->peerReplicas.store(r, std::memory_order_relaxed);
  const bool ranked = rank >= 0 && rank < std::max<std::int64_t>(r, options_.replicas);
  slot->peerRank.store(ranked ? static_cast<std::int16_t>(rank) : std::int16_t{-1},
                       std::memory_order_relaxed);
  if (!others) {
    slot->peerRequests.store(-1, std::memory_order_relaxed);
    return true;
  }
  const ScrapeMark c = detail::readCounters(*slot);
  slot->syncDispatchedRequests.store(static_cast<std::uint32_t>(c.dispatchedRequests),
                                     std::memory_order_relaxed);
  slot->syncDispatchedTokens.store(static_cast<std::uint32_t>(c.dispatchedTokens),
                                   std::memory_order_relaxed);
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

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
