// Implementation of holdback/detector/dispatch_ledger.hpp, the requests in flight by priority
// ("Requests in flight by priority" in its header): dispatch and completion at a priority level,
// and inFlightAtOrAbove. Included by dispatch_ledger-inl.hpp.
#pragma once

#include "holdback/detector/dispatch_ledger.hpp"

#include <algorithm>

#include "holdback/detector/detail/ledger_slot-inl.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE detail::LevelCount* DispatchLedger::levelsOf(EndpointId id) const noexcept {
  return slotOf(id) == nullptr ? nullptr : levelsAt(id.index);  // slotOf checks the index
}

// The levels of a slot index that exists; nullptr without levels.
HOLDBACK_INLINE detail::LevelCount* DispatchLedger::levelsAt(std::uint32_t index) const noexcept {
  detail::LevelCount* chunk = level_chunks_[index / kChunkSize].load(std::memory_order_acquire);
  return chunk == nullptr ? nullptr : chunk + (index % kChunkSize) * options_.priorityLevels.size();
}

// The highest level at or below `priority`; below every level, the lowest (0). Levels exist.
HOLDBACK_INLINE std::size_t DispatchLedger::levelIndex(Priority priority) const noexcept {
  const std::vector<Priority>& levels = options_.priorityLevels;
  const auto above = std::upper_bound(levels.begin(), levels.end(), priority);
  return above == levels.begin() ? 0 : static_cast<std::size_t>(above - levels.begin()) - 1;
}

HOLDBACK_INLINE std::int64_t DispatchLedger::atOrAbove(const detail::LevelCount* levels,
                                                       Priority priority) const noexcept {
  if (levels == nullptr) return 0;
  const std::vector<Priority>& all = options_.priorityLevels;
  std::int64_t sum = 0;
  for (std::size_t l = static_cast<std::size_t>(std::lower_bound(all.begin(), all.end(), priority) -
                                                all.begin());
       l < all.size(); ++l) {
    // As detail::tryReadCounters: the dispatches read before and after the completions; when they
    // agree every completion read belongs to a dispatch read. A few retries under a storm of
    // dispatches, then the later count (errs high, never negative).
    constexpr auto kAcquire = std::memory_order_acquire;
    std::uint64_t dispatched = 0;
    std::uint64_t completed = 0;
    for (int attempt = 0; attempt < 8; ++attempt) {
      const std::uint64_t before = levels[l].dispatched.load(kAcquire);
      completed = levels[l].completed.load(kAcquire);
      dispatched = levels[l].dispatched.load(kAcquire);
      if (dispatched == before) break;
    }
    sum += std::max<std::int64_t>(0, detail::since(dispatched, completed));
  }
  return sum;
}

HOLDBACK_INLINE DispatchHandle DispatchLedger::dispatch(EndpointId id, std::int64_t tokens,
                                                        Priority priority) noexcept {
  DispatchHandle handle = dispatch(id, tokens);
  detail::LevelCount* levels = handle.active() ? levelsOf(id) : nullptr;
  if (levels != nullptr) {
    handle.level_ = &levels[levelIndex(priority)];
    handle.level_->dispatched.fetch_add(1, std::memory_order_release);
  }
  return handle;
}

HOLDBACK_INLINE bool DispatchLedger::recordDispatch(EndpointId id, std::int64_t tokens,
                                                    Priority priority) noexcept {
  DispatchHandle handle = dispatch(id, tokens, priority);
  const bool counted = handle.active();
  handle.slot_ = nullptr;  // the host completes it with recordCompletion
  handle.level_ = nullptr;
  return counted;
}

HOLDBACK_INLINE bool DispatchLedger::recordCompletion(EndpointId id, std::int64_t tokens,
                                                      Priority priority) noexcept {
  if (!recordCompletion(id, tokens)) return false;
  detail::LevelCount* levels = levelsOf(id);
  if (levels == nullptr) return true;
  // At most as many completions as dispatches at the level (a completion without one is dropped).
  detail::LevelCount& level = levels[levelIndex(priority)];
  constexpr auto kAcquire = std::memory_order_acquire;
  std::uint64_t completed = level.completed.load(kAcquire);
  while (detail::since(level.dispatched.load(kAcquire), completed) > 0 &&
         !level.completed.compare_exchange_weak(completed, completed + 1, std::memory_order_acq_rel,
                                                kAcquire)) {
  }
  return true;
}

HOLDBACK_INLINE void DispatchLedger::inFlightAtOrAbove(std::span<const EndpointId> ids,
                                                       Priority priority,
                                                       std::span<std::int64_t> out) const noexcept {
  const std::size_t n = std::min(ids.size(), out.size());
  for (std::size_t k = 0; k < n; ++k) out[k] = atOrAbove(levelsOf(ids[k]), priority);
}

HOLDBACK_INLINE void DispatchLedger::inFlightAtOrAbove(std::span<const Endpoint> endpoints,
                                                       Priority priority,
                                                       std::span<std::int64_t> out) const noexcept {
  std::shared_lock lock(registry_mutex_);
  const std::size_t n = std::min(endpoints.size(), out.size());
  for (std::size_t k = 0; k < n; ++k) {
    const auto index = indexOf(endpoints[k].name);  // a live name (under the registry lock)
    out[k] = index ? atOrAbove(levelsAt(*index), priority) : 0;
  }
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
