// detail::LeaseTable: the dispatched requests that still hold a slot, by id, with their band and
// dispatch time. The flow controller records a lease when it dispatches a request and drops it when
// the host releases it (the request ended) or revokes it; the table answers "how many requests of
// band p are in flight", "how long did this one hold its slot" and, for eviction, "the newest
// lease of the lowest band".
//
// The structure
//   Slots in one vector, reused through a free list; a FlatIndex (flat_index.hpp: linear
//   probing, power-of-two size from 64, load <= 1/2, backward-shift deletion, so no tombstones;
//   homed by the low bits of mix64(id)) maps a RequestId to its slot; each band's leases form a
//   doubly linked list in dispatch order (oldest at the head, newest at the tail). add, find,
//   remove and newest/oldest are O(1) expected. Storage grows by doubling and is kept: after
//   warm-up the table does not allocate.
//
// Bad input: id 0 is never stored (add returns false); adding an id that is present returns
// false and changes nothing; removing an unknown id returns nullopt. Bands are small indices the
// caller assigns (e.g. its band table's positions), below `bandCapacity` given at construction
// or by reserveBands(); an out-of-range band is rejected by add.
//
// Internal (not installed API): the controller's (ControllerCore) lease mechanism.
//
// Thread safety: thread-compatible (the controller guards it with its own lock).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "holdback/core/types.hpp"
#include "holdback/flow/detail/flat_index.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

class LeaseTable {
 public:
  using Id = std::uint64_t;
  static constexpr std::uint32_t kNone = 0xffffffffu;
  static constexpr std::uint32_t kNoEndpoint = 0xffffffffu;

  struct Lease {
    Id id = 0;
    std::uint32_t band = 0;
    Priority priority = 0;
    TimePoint dispatchedAt{};
    std::uint64_t tokens = 0;     // the host's estimate of the request's footprint; 0 = unknown
    bool revoked = false;         // an eviction was issued and not yet confirmed
    std::uint64_t generated = 0;  // tokens generated so far (work lost if it is revoked)
    bool delivered = false;       // its dispatch outcome has reached the host (revocable)
    // The endpoint the host dispatched it to (its position in the endpoint source's list, as
    // Ticket::setEndpoint reported it); kNoEndpoint = unknown.
    std::uint32_t endpoint = kNoEndpoint;
    std::uint64_t kvTokens = 0;  // the request's declared KV footprint (FlowRequest::kvTokens)
    bool restoredFor = false;    // a revocation was issued where it waited (at most one)
    bool started = false;        // the host saw it start on its server (markStarted)
    bool parked = false;         // the host holds it back from its server (setParked)
  };

  explicit LeaseTable(std::size_t bandCapacity = 0) { reserveBands(bandCapacity); }

  // Makes room for bands [0, n). Allocates (call it when bands are added, not per request).
  void reserveBands(std::size_t n) {
    if (n > bands_.size()) bands_.resize(n);
  }
  [[nodiscard]] std::size_t bandCapacity() const noexcept { return bands_.size(); }

  // Records a lease. False for id 0, a present id, or a band >= bandCapacity().
  bool add(Id id, std::uint32_t band, Priority priority, TimePoint dispatchedAt,
           std::uint64_t tokens = 0, std::uint64_t kvTokens = 0) {
    if (id == 0 || band >= bands_.size() || findSlot(id) != kNone) return false;
    index_.reserve(count_ + 1);  // growth before any change
    std::uint32_t slot = free_;
    if (slot != kNone) {
      free_ = slots_[slot].next;
    } else {
      slot = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[slot];
    s.lease = Lease{id, band, priority, dispatchedAt, tokens, false};
    s.lease.kvTokens = kvTokens;
    // Append at the band's tail (newest).
    BandList& list = bands_[band];
    s.prev = list.tail;
    s.next = kNone;
    if (list.tail != kNone) {
      slots_[list.tail].next = slot;
    } else {
      list.head = slot;
    }
    list.tail = slot;
    ++list.count;
    index_.insert(IndexEntry{id, slot});  // capacity reserved
    ++count_;
    return true;
  }

  // Removes a lease and returns it; nullopt when unknown.
  std::optional<Lease> remove(Id id) noexcept {
    const std::uint32_t slot = findSlot(id);
    if (slot == kNone) return std::nullopt;
    Slot& s = slots_[slot];
    const Lease out = s.lease;
    BandList& list = bands_[out.band];
    if (s.prev != kNone) {
      slots_[s.prev].next = s.next;
    } else {
      list.head = s.next;
    }
    if (s.next != kNone) {
      slots_[s.next].prev = s.prev;
    } else {
      list.tail = s.prev;
    }
    --list.count;
    (void)index_.erase(id, [id](const IndexEntry& e) { return e.id == id; });
    s.lease.id = 0;
    s.next = free_;
    s.prev = kNone;
    free_ = slot;
    --count_;
    return out;
  }

  [[nodiscard]] const Lease* find(Id id) const noexcept {
    const std::uint32_t slot = findSlot(id);
    return slot == kNone ? nullptr : &slots_[slot].lease;
  }
  // Marks a lease revoked (an eviction was issued). False when unknown or already revoked.
  bool markRevoked(Id id) noexcept {
    const std::uint32_t slot = findSlot(id);
    if (slot == kNone || slots_[slot].lease.revoked) return false;
    slots_[slot].lease.revoked = true;
    return true;
  }

  // Marks a lease's dispatch outcome delivered. False when unknown.
  bool markDelivered(Id id) noexcept {
    const std::uint32_t slot = findSlot(id);
    if (slot == kNone) return false;
    slots_[slot].lease.delivered = true;
    return true;
  }
  // Marks a lease started on its server. False when unknown.
  bool markStarted(Id id) noexcept {
    const std::uint32_t slot = findSlot(id);
    if (slot == kNone) return false;
    slots_[slot].lease.started = true;
    return true;
  }
  // Marks a lease parked (held back from its server by the host) or not. False when unknown.
  bool setParked(Id id, bool parked) noexcept {
    const std::uint32_t slot = findSlot(id);
    if (slot == kNone) return false;
    slots_[slot].lease.parked = parked;
    return true;
  }
  // Sets a lease's footprint and generated tokens. False when unknown.
  bool setTokens(Id id, std::uint64_t tokens, std::uint64_t generated) noexcept {
    const std::uint32_t slot = findSlot(id);
    if (slot == kNone) return false;
    slots_[slot].lease.tokens = tokens;
    slots_[slot].lease.generated = generated;
    return true;
  }

  // Records the endpoint a lease was dispatched to (kNoEndpoint: unknown). False when unknown.
  bool setEndpoint(Id id, std::uint32_t endpoint) noexcept {
    const std::uint32_t slot = findSlot(id);
    if (slot == kNone) return false;
    slots_[slot].lease.endpoint = endpoint;
    return true;
  }

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t inFlight(std::uint32_t band) const noexcept {
    return band < bands_.size() ? bands_[band].count : 0;
  }

  // Walks band `band`'s leases from the newest to the oldest; `visit(const Lease&)` returns false
  // to stop. The table must not be modified during the walk.
  template <class Visit>
  void newestFirst(std::uint32_t band, Visit&& visit) const {
    if (band >= bands_.size()) return;
    for (std::uint32_t slot = bands_[band].tail; slot != kNone; slot = slots_[slot].prev) {
      if (!visit(static_cast<const Lease&>(slots_[slot].lease))) return;
    }
  }
  // newestFirst with a mutable lease: `visit` may change its flags and token figures (not its
  // id or band).
  template <class Visit>
  void newestFirstMutable(std::uint32_t band, Visit&& visit) {
    if (band >= bands_.size()) return;
    for (std::uint32_t slot = bands_[band].tail; slot != kNone; slot = slots_[slot].prev) {
      if (!visit(slots_[slot].lease)) return;
    }
  }
  // Oldest first (the leases most likely to end soon when holding times are similar).
  template <class Visit>
  void oldestFirst(std::uint32_t band, Visit&& visit) const {
    if (band >= bands_.size()) return;
    for (std::uint32_t slot = bands_[band].head; slot != kNone; slot = slots_[slot].next) {
      if (!visit(static_cast<const Lease&>(slots_[slot].lease))) return;
    }
  }

  // Moves every lease of band `from` to band `to` (a band's position changed). Appends in
  // dispatch order is not preserved across bands; within each band it is. O(leases moved).
  void moveBand(std::uint32_t from, std::uint32_t to) {
    if (from == to || from >= bands_.size() || to >= bands_.size()) return;
    BandList& src = bands_[from];
    for (std::uint32_t slot = src.head; slot != kNone;) {
      const std::uint32_t next = slots_[slot].next;
      slots_[slot].lease.band = to;
      BandList& dst = bands_[to];
      slots_[slot].prev = dst.tail;
      slots_[slot].next = kNone;
      if (dst.tail != kNone) {
        slots_[dst.tail].next = slot;
      } else {
        dst.head = slot;
      }
      dst.tail = slot;
      ++dst.count;
      slot = next;
    }
    src = BandList{};
  }

 private:
  struct Slot {
    Lease lease;
    std::uint32_t prev = kNone;
    std::uint32_t next = kNone;  // also the free-list link
  };
  struct BandList {
    std::uint32_t head = kNone;
    std::uint32_t tail = kNone;
    std::size_t count = 0;
  };
  struct IndexEntry {
    Id id = 0;  // 0 = empty
    std::uint32_t slot = kNone;
  };

  struct IndexPolicy {
    using Slot = IndexEntry;
    static constexpr std::size_t kInitialCapacity = 64;
    static bool empty(const IndexEntry& e) noexcept { return e.id == 0; }
    static std::uint64_t key(const IndexEntry& e) noexcept { return e.id; }
    // Sequential ids spread over the table.
    static std::size_t home(std::uint64_t id, unsigned shift) noexcept {
      return static_cast<std::size_t>(mix64(id) & (~std::uint64_t{0} >> shift));
    }
  };

  [[nodiscard]] std::uint32_t findSlot(Id id) const noexcept {
    if (id == 0) return kNone;
    const IndexEntry* e = index_.find(id, [id](const IndexEntry& x) { return x.id == id; });
    return e == nullptr ? kNone : e->slot;
  }

  std::vector<Slot> slots_;
  FlatIndex<IndexPolicy> index_;
  std::vector<BandList> bands_;
  std::uint32_t free_ = kNone;
  std::size_t count_ = 0;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
