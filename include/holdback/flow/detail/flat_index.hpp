// detail::FlatIndex: an open-addressing hash index (linear probing), the one behind a band's flows
// by id (FlowIndex, band_table.hpp) and the dispatched requests by id (LeaseTable). Internal (not
// installed API).
//
// What it is
//   A power-of-two array of Policy::Slot values, each either empty (Policy::empty) or an entry
//   whose probe sequence starts at Policy::home(Policy::key(slot), shift) (shift: 64 - log2 of
//   the capacity) and goes forward, wrapping. The index does not know how an entry is matched:
//   find and erase take the key to start probing from and a predicate on slots, so an entry may
//   store a hash and compare the id it points to (flows) or store the id itself (leases). The
//   predicate is never called on an empty slot.
//
// Invariants (hold between calls)
//   - Load: size() <= capacity() / 2 once an entry is in (growth doubles the array, from
//     Policy::kInitialCapacity, before an insertion would exceed half).
//   - Probe runs: between an entry's home and its slot there is no empty slot. Erasure keeps it
//     by shifting the following entries of the run back (backward-shift deletion), so there are
//     no tombstones and a lookup stops at the first empty slot.
//   - The array never shrinks: once the index has held n entries, inserting up to n again does
//     not allocate.
//
// The policy (a struct of static members):
//   using Slot = ...;                      a trivially copyable value; Slot{} is empty
//   static constexpr std::size_t kInitialCapacity;  a power of two >= 2
//   static bool empty(const Slot&);
//   static std::uint64_t key(const Slot&); what home() hashes (a stored hash, or the id)
//   static std::size_t home(std::uint64_t key, unsigned shift);  a position below 2^(64-shift)
//
// Cost: find, insert, erase O(1) expected; growth O(capacity). Allocation: only when it grows.
//
// Thread safety: thread-compatible.
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// splitmix64's finalizer, a bijective mix of 64 bits: spreads sequential ids and sequence
// numbers over a table (or over treap ranks).
inline std::uint64_t mix64(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class Policy>
class FlatIndex {
 public:
  using Slot = typename Policy::Slot;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return slots_.size(); }

  // The entry probed from home(key) for which match(slot) holds; nullptr when none does.
  template <class Match>
  [[nodiscard]] const Slot* find(std::uint64_t key, Match&& match) const noexcept {
    if (size_ == 0) return nullptr;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = home(key);; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (Policy::empty(s)) return nullptr;
      if (match(s)) return &s;
    }
  }

  // Grows the array, if needed, so that `count` entries fit under the load bound (allocates
  // then, and only then).
  void reserve(std::size_t count) {
    if (2 * count <= slots_.size()) return;
    std::size_t n = slots_.empty() ? Policy::kInitialCapacity : 2 * slots_.size();
    while (2 * count > n) n *= 2;
    std::vector<Slot> old(n);
    old.swap(slots_);
    shift_ = 64;
    for (std::size_t k = n; k > 1; k >>= 1) shift_ -= 1;
    for (const Slot& s : old) {
      if (!Policy::empty(s)) place(s);
    }
  }

  // Adds an entry that is not in the index (growing first if needed).
  void insert(const Slot& slot) {
    reserve(size_ + 1);
    place(slot);
    size_ += 1;
  }

  // Removes the entry probed from home(key) for which match(slot) holds; false when none does.
  template <class Match>
  bool erase(std::uint64_t key, Match&& match) noexcept {
    if (size_ == 0) return false;
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = home(key);
    for (;; i = (i + 1) & mask) {
      if (Policy::empty(slots_[i])) return false;  // not indexed
      if (match(static_cast<const Slot&>(slots_[i]))) break;
    }
    // Backward shift: move each following entry of the run into the hole when its home does
    // not lie (cyclically) in (hole, entry].
    for (std::size_t j = (i + 1) & mask; !Policy::empty(slots_[j]); j = (j + 1) & mask) {
      const std::size_t h = home(Policy::key(slots_[j]));
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    size_ -= 1;
    return true;
  }

 private:
  [[nodiscard]] std::size_t home(std::uint64_t key) const noexcept {
    return Policy::home(key, shift_);
  }
  // Puts an entry in the first empty slot of its probe sequence (capacity reserved).
  void place(const Slot& s) noexcept {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = home(Policy::key(s));
    while (!Policy::empty(slots_[i])) i = (i + 1) & mask;
    slots_[i] = s;
  }

  std::vector<Slot> slots_;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
