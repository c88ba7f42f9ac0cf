// detail::IdIndex: the queued records (Item, item_pool.hpp) by request id. Internal (not
// installed API); BandTable (band_table.hpp) owns one.
//
// The structure: an intrusive hash table. Each record is its own chain node (Item::hash_next),
// so indexing a record allocates nothing beyond the bucket array: a power-of-two array of chain
// heads, homed by the id's Fibonacci hash (top bits of id * 2^64/phi), grown (doubled, from 64)
// at load factor 1, halved by shrinkToFit() while more than 4x larger than needed.
//
// Invariants (hold between calls): every indexed record is in exactly one chain, the one of its
// id's bucket; size() is the number of indexed records; ids are unique (the caller's contract).
//
// Cost: find, insert, erase O(1) expected (erase walks the record's chain); growth and
// shrinking O(buckets + records). Allocation: only when the bucket array grows or shrinks; the
// old array of a shrink is handed to the caller, to free after its lock.
//
// Thread safety: thread-compatible (the owner's lock guards it).
#pragma once

#include "holdback/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "holdback/core/types.hpp"
#include "holdback/flow/detail/item_pool.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

class IdIndex {
 public:
  [[nodiscard]] Item* find(RequestId id) const noexcept;
  // Allocates only when the bucket array grows.
  void insert(Item* item);
  void erase(Item* item) noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // Halves the bucket array while it is more than 4x larger than needed (not below the
  // minimum); the old array goes into `old`, to free after the owner's lock.
  void shrinkToFit(std::vector<Item*>& old);
  template <class F>
  void forEach(F&& f) const {
    for (Item* head : buckets_)
      for (Item* it = head; it != nullptr; it = it->hash_next) f(it);
  }

 private:
  static constexpr std::size_t kMinBuckets = 64;
  [[nodiscard]] std::size_t slot(RequestId id) const noexcept {
    return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  // Moves every record into a new array of `buckets` (a power of two); returns the old array.
  std::vector<Item*> rehash(std::size_t buckets);

  std::vector<Item*> buckets_;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

inline Item* IdIndex::find(RequestId id) const noexcept {
  if (size_ == 0) return nullptr;
  for (Item* it = buckets_[slot(id)]; it != nullptr; it = it->hash_next) {
    if (it->id == id) return it;
  }
  return nullptr;
}

inline std::vector<Item*> IdIndex::rehash(std::size_t buckets) {
  std::vector<Item*> old(buckets, nullptr);
  old.swap(buckets_);
  shift_ = 64;
  for (std::size_t n = buckets; n > 1; n >>= 1) shift_ -= 1;
  for (Item* head : old) {
    while (head != nullptr) {
      Item* next = head->hash_next;
      Item*& b = buckets_[slot(head->id)];
      head->hash_next = b;
      b = head;
      head = next;
    }
  }
  return old;
}

inline void IdIndex::insert(Item* item) {
  if (size_ + 1 > buckets_.size()) (void)rehash(std::max(kMinBuckets, buckets_.size() * 2));
  Item*& b = buckets_[slot(item->id)];
  item->hash_next = b;
  b = item;
  size_ += 1;
}

inline void IdIndex::erase(Item* item) noexcept {
  Item** link = &buckets_[slot(item->id)];
  while (*link != item) link = &(*link)->hash_next;
  *link = item->hash_next;
  item->hash_next = nullptr;
  size_ -= 1;
}

inline void IdIndex::shrinkToFit(std::vector<Item*>& old) {
  std::size_t target = buckets_.size();
  while (target > kMinBuckets && size_ * 4 < target) target /= 2;
  if (target != buckets_.size()) old = rehash(target);
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
