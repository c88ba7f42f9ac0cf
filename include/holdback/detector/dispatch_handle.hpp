// DispatchHandle: one dispatched request's claim on an endpoint of a DispatchLedger
// (detector/dispatch_ledger.hpp), and detail::LevelCount, the per-priority-level counters a
// ledger keeps when it counts requests in flight by priority (DispatchLedgerOptions::
// priorityLevels). Included by dispatch_ledger.hpp; use that header.
//
// Thread safety: DispatchHandle is thread-compatible (one handle belongs to one request;
// different handles may be released concurrently); LevelCount's fields are atomics.
#pragma once

#include "holdback/abi.hpp"

#include <atomic>
#include <cstdint>

#include "holdback/detector/detail/ledger_slot.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

class DispatchLedger;

namespace detail {
// The requests dispatched and completed at one priority level of one endpoint (monotonic,
// modulo 2^64; in flight = dispatched - completed).
struct LevelCount {
  std::atomic<std::uint64_t> dispatched{0};
  std::atomic<std::uint64_t> completed{0};
};
}  // namespace detail

// One dispatched request's claim on an endpoint. Move-only; completes exactly once.
class [[nodiscard]] HOLDBACK_API DispatchHandle {
 public:
  DispatchHandle() = default;
  DispatchHandle(DispatchHandle&& other) noexcept
      : slot_(other.slot_), level_(other.level_), tokens_(other.tokens_) {
    other.slot_ = nullptr;
    other.level_ = nullptr;
    other.tokens_ = 0;
  }
  DispatchHandle& operator=(DispatchHandle&& other) noexcept {
    if (this != &other) {
      release();
      slot_ = other.slot_;
      level_ = other.level_;
      tokens_ = other.tokens_;
      other.slot_ = nullptr;
      other.level_ = nullptr;
      other.tokens_ = 0;
    }
    return *this;
  }
  DispatchHandle(const DispatchHandle&) = delete;
  DispatchHandle& operator=(const DispatchHandle&) = delete;
  ~DispatchHandle() { release(); }

  // True until released (or moved from).
  [[nodiscard]] bool active() const noexcept { return slot_ != nullptr; }
  // Tokens still held.
  [[nodiscard]] std::int64_t tokens() const noexcept { return tokens_; }

  // Completes the tokens now (e.g. at the first response chunk); the request stays counted.
  void releaseTokens() noexcept {
    if (slot_ != nullptr && tokens_ != 0) {
      slot_->completedTokens.fetch_add(static_cast<std::uint64_t>(tokens_),
                                       std::memory_order_release);
      tokens_ = 0;
    }
  }
  // Completes the request (and its priority level's count) and any tokens still held. Later
  // calls do nothing.
  void release() noexcept {
    if (slot_ == nullptr) return;
    releaseTokens();
    if (level_ != nullptr) level_->completed.fetch_add(1, std::memory_order_release);
    slot_->completedRequests.fetch_add(1, std::memory_order_release);
    slot_ = nullptr;
    level_ = nullptr;
  }

 private:
  friend class DispatchLedger;
  DispatchHandle(detail::LedgerSlot* slot, detail::LevelCount* level, std::int64_t tokens) noexcept
      : slot_(slot), level_(level), tokens_(tokens) {}

  detail::LedgerSlot* slot_ = nullptr;
  detail::LevelCount* level_ = nullptr;  // the request's priority level; null: not counted by one
  std::int64_t tokens_ = 0;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
