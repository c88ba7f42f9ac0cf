// detail::Item and its pools: a queued request's record (three sizes), the bounded per-size pools
// that recycle records, the pooled flow-id buffers, and Retired (memory let go of under the
// owner's lock, freed after it). Internal (not installed API); BandTable (band_table.hpp) owns
// one ItemPool and one IdBufferPool.
//
// Invariants (hold between calls)
//   - ItemPool: each size's pool holds at most kMaxSpareItems records, in an array reserved at
//     construction, so recycling a record never allocates; a record goes back to the system
//     (into Retired) only when its pool is full, or when collect() finds it was not needed since
//     the previous collect() (the pool's low-water mark). A pooled record holds no payload.
//   - IdBufferPool: every buffer is in exactly one list, a flow's (the caller's list head) or the
//     free list; the array grows only when no free buffer is left (more ids on the heap queued
//     than ever before), and is released by a collect() that finds none in use.
//
// Cost: take, recycle, keep and take back are O(1); collect is O(records it frees).
// Allocation: a new record when its pool is empty (the table grows), the buffer array's growth;
// otherwise none.
//
// Thread safety: thread-compatible (the owner's lock guards it).
#pragma once

#include "holdback/abi.hpp"

#include <any>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

struct Flow;

// A queued request's record: one pooled block that is also its node in the id index (a hash
// chain) and in its flow's queue (a treap). The flow id and the band priority are the flow's
// (`flow`). Three sizes, each with its own pool: a plain record (96 bytes), a PayloadItem for a
// request with a payload (112), a FullItem for one that also sets a caller deadline, a TTFT
// objective or a receive time other than its enqueue time (136).
struct Item {
  enum Kind : std::uint8_t { kPlain = 0, kWithPayload = 1, kFullKind = 2 };
  static constexpr std::size_t kKinds = 3;
  static constexpr std::uint8_t kHasDeadline = 4;  // FullItem::deadline is set
  static constexpr std::uint8_t kHasTtft = 8;      // FullItem::ttftObjective is set
  static constexpr std::uint8_t kKindMask = 3;

  Item* hash_next = nullptr;  // the id index's chain
  Item* parent = nullptr;     // the flow queue's treap (see ItemQueue)
  Item* left = nullptr;
  Item* right = nullptr;
  Flow* flow = nullptr;  // while queued
  RequestId id = 0;
  std::uint64_t sequence = 0;  // arrival order at the controller (QueuedRequestView::sequence)
  std::uint64_t sizeBytes = 0;
  TimePoint enqueueTime{};
  Duration effectiveTtl{0};
  Priority requestedPriority = 0;
  // FlowRequest::kvTokens (0: not declared; saturated at 2^32 - 1).
  std::uint32_t kvTokens = 0;
  std::uint8_t flags = 0;  // the Kind, kHasDeadline, kHasTtft

  [[nodiscard]] Kind kind() const noexcept { return static_cast<Kind>(flags & kKindMask); }
  [[nodiscard]] std::optional<TimePoint> deadline() const noexcept;
  [[nodiscard]] TimePoint receivedTime() const noexcept;
  [[nodiscard]] std::optional<Duration> ttftObjective() const noexcept;
  // The payload slot (nullptr for a plain record).
  [[nodiscard]] std::any* payload() noexcept;
};

struct PayloadItem : Item {
  std::any payload;
};

struct FullItem final : PayloadItem {
  TimePoint receivedTime{};
  TimePoint deadline{};
  Duration ttftObjective{0};
};

inline std::optional<TimePoint> Item::deadline() const noexcept {
  if ((flags & kHasDeadline) == 0) return std::nullopt;
  return static_cast<const FullItem*>(this)->deadline;
}
inline TimePoint Item::receivedTime() const noexcept {
  return kind() == kFullKind ? static_cast<const FullItem*>(this)->receivedTime : enqueueTime;
}
inline std::optional<Duration> Item::ttftObjective() const noexcept {
  if ((flags & kHasTtft) == 0) return std::nullopt;
  return static_cast<const FullItem*>(this)->ttftObjective;
}
inline std::any* Item::payload() noexcept {
  return kind() == kPlain ? nullptr : &static_cast<PayloadItem*>(this)->payload;
}

// Frees a record of any size.
inline void destroyItem(Item* item) noexcept {
  if (item == nullptr) return;
  switch (item->kind()) {
    case Item::kFullKind:
      delete static_cast<FullItem*>(item);
      break;
    case Item::kWithPayload:
      delete static_cast<PayloadItem*>(item);
      break;
    default:
      delete item;
  }
}

inline constexpr std::uint32_t kNoIdBuffer = 0xffffffffu;

// A request's flow-id string kept for its completion, in its flow's list (or the free list).
struct IdBuffer {
  std::string text;
  std::uint32_t next = kNoIdBuffer;
};

// Memory the table let go of under the owner's lock: freed when this is destroyed, after the
// lock (a record the pool did not keep, an old bucket array, idle flow-id buffers).
struct Retired {
  Retired() = default;
  Retired(Retired&& other) noexcept
      : item(std::exchange(other.item, nullptr)),
        buckets(std::move(other.buckets)),
        id_buffers(std::move(other.id_buffers)) {}
  Retired& operator=(Retired&& other) noexcept {
    if (this != &other) {
      destroyItem(item);
      item = std::exchange(other.item, nullptr);
      buckets = std::move(other.buckets);
      id_buffers = std::move(other.id_buffers);
    }
    return *this;
  }
  Retired(const Retired&) = delete;
  Retired& operator=(const Retired&) = delete;
  ~Retired() { destroyItem(item); }

  Item* item = nullptr;
  std::vector<Item*> buckets;
  std::vector<IdBuffer> id_buffers;
};

// Records each pool (one per record size) keeps at most: 88 to 128 KB each. Above it, finalized
// requests' records are freed (after the lock); collect() also frees what the pools did not need
// since the last collection, so an idle controller returns it.
inline constexpr std::size_t kMaxSpareItems = 1024;

// The pools of records by Item::Kind, at most kMaxSpareItems each, with their smallest sizes
// since the last collect().
class ItemPool {
 public:
  ItemPool() {
    for (auto& pool : spare_) pool.reserve(kMaxSpareItems);  // the pools never grow their arrays
  }
  ~ItemPool() {
    for (auto& pool : spare_)
      for (Item* item : pool) destroyItem(item);
  }
  ItemPool(const ItemPool&) = delete;
  ItemPool& operator=(const ItemPool&) = delete;

  // A record of `kind` from its pool, or a new one when the pool is empty (the table is
  // growing). Its fields are stale: the caller sets every one.
  [[nodiscard]] Item* take(Item::Kind kind) {
    std::vector<Item*>& pool = spare_[kind];
    if (!pool.empty()) {
      Item* item = pool.back();
      pool.pop_back();
      std::size_t& low_water = low_water_[kind];
      if (pool.size() < low_water) low_water = pool.size();
      return item;
    }
    if (kind == Item::kFullKind) return new FullItem();
    if (kind == Item::kWithPayload) return new PayloadItem();
    return new Item();
  }
  // Takes a record back (its payload reset, so the pool keeps nothing alive); a full pool hands
  // it to `freed` instead.
  void recycle(Item* item, Retired& freed) noexcept {
    if (std::any* payload = item->payload()) payload->reset();
    item->flow = nullptr;
    std::vector<Item*>& pool = spare_[item->kind()];
    if (pool.size() < kMaxSpareItems) {
      pool.push_back(item);  // capacity reserved: no allocation
    } else {
      freed.item = item;
    }
  }
  // The records no request needed since the last collection go into `freed`.
  void collect(std::vector<Retired>& freed) {
    for (std::size_t k = 0; k < spare_.size(); ++k) {
      std::vector<Item*>& pool = spare_[k];
      for (std::size_t i = 0; i < low_water_[k] && !pool.empty(); ++i) {
        freed.emplace_back().item = pool.back();
        pool.pop_back();
      }
      low_water_[k] = pool.size();
    }
  }
  [[nodiscard]] std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const auto& pool : spare_) n += pool.size();
    return n;
  }

 private:
  std::array<std::vector<Item*>, Item::kKinds> spare_;
  std::array<std::size_t, Item::kKinds> low_water_{};
};

// Flow-id buffers: one per queued request whose flow id is on the heap, in lists whose heads
// the caller keeps (Flow::id_buffers), so a finalization hands its completion a buffer instead
// of allocating one.
class IdBufferPool {
 public:
  // Keeps `text` in a buffer at the head of `list` (growth when no buffer is free: a burst).
  void keep(std::uint32_t& list, std::string&& text) {
    std::uint32_t i = free_;
    if (i == kNoIdBuffer) {
      i = static_cast<std::uint32_t>(buffers_.size());
      buffers_.emplace_back();  // growth (more such requests queued than ever before)
    } else {
      free_ = buffers_[i].next;
    }
    IdBuffer& b = buffers_[i];
    b.text = std::move(text);
    b.next = list;
    list = i;
    used_ += 1;
  }
  // Moves the head of `list`'s text into `out` (unchanged when the list is empty).
  void take(std::uint32_t& list, std::string& out) noexcept {
    const std::uint32_t i = list;
    if (i == kNoIdBuffer) return;
    IdBuffer& b = buffers_[i];
    out = std::move(b.text);
    list = b.next;
    b.next = free_;
    free_ = i;
    used_ -= 1;
  }
  // With no buffer in use, the array goes into `freed`.
  void collect(std::vector<Retired>& freed) {
    if (used_ != 0 || buffers_.capacity() == 0) return;
    freed.emplace_back().id_buffers = std::move(buffers_);
    buffers_ = {};
    free_ = kNoIdBuffer;
  }

 private:
  std::vector<IdBuffer> buffers_;
  std::uint32_t free_ = kNoIdBuffer;
  std::size_t used_ = 0;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
