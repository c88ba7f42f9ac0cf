// The orders and indexes a band (detail::Band, band_table.hpp) keeps over its flows and their
// queued records, built on the containers of flow/detail/: a flow's queue (ItemLess, ItemQueue:
// an IntrusiveTreap of records), the band's non-empty flows by head (HeadLess, HeadIndex: an
// IntrusiveTreap of flows), its flows by id in order (IdLess, ActiveSet) and by hash (FlowIndex:
// a FlatIndex). Internal (not installed API). The members that read a Flow or a Band are defined
// in band_table.hpp, after them.
//
// Allocation: none, except FlowIndex's growth (a new flow) and ActiveSet's nodes (kept by the
// flows, see Band). Thread safety: thread-compatible (the band table's owner's lock guards them).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string_view>

#include "holdback/flow/detail/flat_index.hpp"
#include "holdback/flow/detail/intrusive_treap.hpp"
#include "holdback/flow/detail/item_pool.hpp"
#include "holdback/flow/fairness.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

struct Flow;
struct Band;

// Orders a flow's queue: the band's OrderingPolicy, then the arrival sequence. The built-in FCFS
// policy is compared on the records directly; any other policy sees QueuedRequestViews built
// from the records for the call (makeView).
struct ItemLess {
  const OrderingPolicy* ordering = nullptr;
  bool fcfs = false;  // `ordering` is the built-in FcfsOrderingPolicy
  bool operator()(const Item* a, const Item* b) const noexcept;
  // The same with the records' views at hand (a policy other than FCFS).
  bool operator()(const QueuedRequestView& va, const Item* a, const QueuedRequestView& vb,
                  const Item* b) const noexcept;
};

// The public view of a queued record (for OrderingPolicy::less and FlowQueueView::head).
QueuedRequestView makeView(const Item& item) noexcept;

// Distinct pseudo-random treap ranks from unique sequence numbers, not chosen by the host
// (mix64 of the sequence plus the golden-ratio increment: splitmix64's output).
inline std::uint64_t mixSequence(std::uint64_t sequence) noexcept {
  return mix64(sequence + 0x9E3779B97F4A7C15ull);
}

// One flow's queue, ordered by ItemLess: an IntrusiveTreap over the records' links, whose heap
// priorities are a mix of the (unique) arrival sequence; FCFS enqueue (at the end) and dispatch
// (at the front) compare O(1) times. No allocation.
class ItemQueue {
 public:
  explicit ItemQueue(ItemLess less) noexcept : less_(less) {}
  ItemQueue(const ItemQueue&) = delete;
  ItemQueue& operator=(const ItemQueue&) = delete;

  [[nodiscard]] bool empty() const noexcept { return tree_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return tree_.size(); }
  // The record that goes first; nullptr when empty.
  [[nodiscard]] Item* front() const noexcept { return tree_.front(); }
  [[nodiscard]] const ItemLess& key_comp() const noexcept { return less_; }
  // `view`: the item's view, when the caller has it (saves building it for a policy other than
  // FCFS).
  void insert(Item* item, const QueuedRequestView* view = nullptr) noexcept;
  void erase(Item* item) noexcept { tree_.erase(item); }  // no comparison
  // In-order successor; nullptr after the last.
  [[nodiscard]] static Item* next(const Item* item) noexcept;
  template <class F>
  void forEach(F&& f) const {
    for (Item* it = tree_.front(); it != nullptr; it = next(it)) f(it);
  }

 private:
  struct Rank {
    static std::uint64_t of(const Item* item) noexcept;
  };
  ItemLess less_;
  IntrusiveTreap<Item, Rank> tree_;
};

// Orders non-empty flows by their heads.
struct HeadLess {
  ItemLess item;
  bool operator()(const Flow* a, const Flow* b) const noexcept;
};

// The first 8 bytes of `s`, big-endian, zero-padded: comparing two prefixes as integers orders
// as comparing those bytes lexicographically (as unsigned chars, like string_view's compare), so
// equal prefixes are the only case that needs the full comparison.
inline std::uint64_t idPrefix(std::string_view s) noexcept {
  std::uint64_t p = 0;
  const std::size_t n = s.size() < 8 ? s.size() : 8;
  for (std::size_t i = 0; i < n; ++i) p = (p << 8) | static_cast<unsigned char>(s[i]);
  return n == 0 ? 0 : p << (8 * (8 - n));
}

// Orders flows by id (lexicographic), the prefix first.
struct IdLess {
  using is_transparent = void;
  struct Key {
    std::uint64_t prefix;
    std::string_view id;
  };
  static Key key(const Flow* f) noexcept;
  static Key key(std::string_view s) noexcept { return {idPrefix(s), s}; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    const Key ka = key(a);
    const Key kb = key(b);
    if (ka.prefix != kb.prefix) return ka.prefix < kb.prefix;
    return ka.id < kb.id;
  }
};

// A band's non-empty flows ordered by their heads (HeadLess): an IntrusiveTreap over the flows'
// own links, so a flow entering or leaving it allocates nothing and touches no separate node. A
// flow that becomes non-empty under arrival order has the newest head and goes last (one
// comparison); dispatching the best head erases the first (no comparison). Defined after Flow.
class HeadIndex {
 public:
  explicit HeadIndex(HeadLess less) noexcept : less_(less) {}
  HeadIndex(const HeadIndex&) = delete;
  HeadIndex& operator=(const HeadIndex&) = delete;
  [[nodiscard]] bool empty() const noexcept { return tree_.empty(); }
  [[nodiscard]] Flow* front() const noexcept { return tree_.front(); }
  [[nodiscard]] const HeadLess& key_comp() const noexcept { return less_; }
  // Inserts a non-empty flow that is not in the index (its rank from its head's sequence).
  void insert(Flow* f) noexcept;
  void erase(Flow* f) noexcept;  // no comparison

 private:
  struct Rank {
    static std::uint64_t of(const Flow* f) noexcept;
  };
  HeadLess less_;
  IntrusiveTreap<Flow, Rank> tree_;
};

using ActiveSet = std::set<Flow*, IdLess>;

// A band's flows by id: a FlatIndex (open addressing, linear probing, at most half full,
// backward-shift erasure) over (hash, Flow*) slots, homed by the hash's top bits (Fibonacci
// hashing). A lookup reads one slot array (the stored hash is compared before the id) instead of
// a node-based map's bucket, node and key. Allocates only when it grows (a new flow).
class FlowIndex {
 public:
  [[nodiscard]] static std::uint64_t hashOf(std::string_view id) noexcept {
    return std::hash<std::string_view>{}(id);
  }
  [[nodiscard]] Flow* find(std::string_view id, std::uint64_t hash) const noexcept;
  // Adds a flow whose id is not in the index (by its id_hash).
  void insert(Flow* f);
  void erase(const Flow* f) noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return index_.size(); }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    Flow* flow = nullptr;  // nullptr: empty
  };
  struct Policy {
    using Slot = FlowIndex::Slot;
    static constexpr std::size_t kInitialCapacity = 16;
    static bool empty(const Slot& s) noexcept { return s.flow == nullptr; }
    static std::uint64_t key(const Slot& s) noexcept { return s.hash; }
    static std::size_t home(std::uint64_t hash, unsigned shift) noexcept {
      return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >> shift);
    }
  };
  FlatIndex<Policy> index_;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
