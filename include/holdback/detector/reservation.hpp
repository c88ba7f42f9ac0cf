// Authoritative reservation: gateway replicas that book every dispatch's footprint (one slot and
// its KV tokens) on its endpoint in one table they all share, so that two replicas never hand out
// the same free room. The rule is one pure function, reservationFits; ReservationTable is an
// in-memory table applying it (the simulator's, and the reference for a store's implementation:
// the gateway's Redis script mirrors reservationFits line by line). docs/design/replicas.md
// describes the protocol (refusal, parking, leases) around it.
//
// The rule
//   An endpoint's room is what its latest scrape showed (ReservationRoom: its capacity and the
//   slots and KV tokens in use) and the live bookings of every replica on it (ReservationBooked).
//   Per dimension, used = max(scraped, booked): the scrape counts requests no booking knows of
//   (another client, a booking expired), the bookings count dispatches the scrape has not seen
//   yet. A request of `kvTokens` fits iff
//     - slots <= 0 (unknown) or usedSlots + 1 <= slots, and
//     - kvTokens <= 0, or kvCapacityTokens <= 0 (unknown), or usedKv + kvTokens <=
//       kvCapacityTokens, or usedSlots == 0 (an oversized request on an idle endpoint always
//       fits, so that nothing starves).
//   Every input is an integer; a negative value counts as 0. No input overflows (the rule is
//   evaluated without sums: usedSlots < slots, kvTokens <= kvCapacityTokens - usedKv).
//
// The table
//   Bookings are keyed by (replica, request id) and carry a lease: a booking whose lease has
//   passed is removed by expire(now), so a replica that dies frees its bookings within the lease
//   (a live replica renews its own with renew()). Endpoints are dense indexes [0, endpoints())
//   the host maps to its endpoint names. tryReserve checks the rule against the room the caller
//   passes (its latest scrape of that endpoint) and the live bookings, and books or refuses in
//   one step under the table's lock.
//
// Thread safety: reservationFits is a pure function (thread-safe). ReservationTable is
// thread-safe: every member may be called concurrently from any thread (one internal mutex, held
// only for the call, never while host code runs).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "holdback/core/thread_annotations.hpp"
#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// An endpoint's capacity and its latest scrape. Named ReservationRoom (core/capacity.hpp's
// EndpointRoom is the free room a detector reports).
struct ReservationRoom {
  std::int64_t slots = 0;             // requests that run at once (max-num-seqs); <= 0: unknown
  std::int64_t kvCapacityTokens = 0;  // KV-cache capacity in tokens; <= 0: unknown
  std::int64_t scrapedSlotsUsed = 0;  // requests running at the scrape
  std::int64_t scrapedKvUsed = 0;     // KV tokens in use at the scrape
};

// The live bookings of all replicas on one endpoint.
struct ReservationBooked {
  std::int64_t slots = 0;
  std::int64_t kvTokens = 0;
  friend constexpr bool operator==(const ReservationBooked&, const ReservationBooked&) = default;
};

// The rule (see the file comment): true iff a request of `kvTokens` fits on an endpoint of
// `room` with `booked` live bookings.
[[nodiscard]] constexpr bool reservationFits(const ReservationRoom& room,
                                             const ReservationBooked& booked,
                                             std::int64_t kvTokens) noexcept {
  const auto nonNegative = [](std::int64_t v) { return v > 0 ? v : std::int64_t{0}; };
  const std::int64_t slots = nonNegative(room.slots);
  const std::int64_t kvCapacity = nonNegative(room.kvCapacityTokens);
  const std::int64_t scrapedSlots = nonNegative(room.scrapedSlotsUsed);
  const std::int64_t scrapedKv = nonNegative(room.scrapedKvUsed);
  const std::int64_t bookedSlots = nonNegative(booked.slots);
  const std::int64_t bookedKv = nonNegative(booked.kvTokens);
  const std::int64_t tokens = nonNegative(kvTokens);
  const std::int64_t usedSlots = scrapedSlots > bookedSlots ? scrapedSlots : bookedSlots;
  const std::int64_t usedKv = scrapedKv > bookedKv ? scrapedKv : bookedKv;
  // Written without sums, so that no input (up to INT64_MAX) overflows.
  if (slots > 0 && usedSlots >= slots) return false;
  return tokens == 0 || kvCapacity == 0 ||
         (usedKv <= kvCapacity && tokens <= kvCapacity - usedKv) || usedSlots == 0;
}

// One booking, as the table returns it on release or expiry.
struct ReservationBooking {
  std::size_t endpoint = 0;
  std::int64_t replica = 0;
  RequestId request = 0;
  std::int64_t kvTokens = 0;  // as booked (negative requests book 0)
  TimePoint leaseUntil{};
};

// The outcome of one tryReserve.
struct ReservationReply {
  bool booked = false;
  // The endpoint's live bookings after the call (every replica's, this one's included).
  ReservationBooked total;
};

// The shared table (see the file comment).
class HOLDBACK_API ReservationTable {
 public:
  explicit ReservationTable(std::size_t endpoints) : endpoints_(endpoints), booked_(endpoints) {}
  ReservationTable(const ReservationTable&) = delete;
  ReservationTable& operator=(const ReservationTable&) = delete;

  [[nodiscard]] std::size_t endpoints() const noexcept { return endpoints_; }

  // Books one slot and `kvTokens` on `endpoint` for (replica, request) until `leaseUntil` if
  // reservationFits(room, booked(endpoint), kvTokens); refuses otherwise. An endpoint out of
  // range refuses. A key already booked is refused too (a request holds at most one booking:
  // release it first), and so is a booking whose table could not grow (out of memory).
  ReservationReply tryReserve(std::size_t endpoint, const ReservationRoom& room,
                              std::int64_t replica, RequestId request, std::int64_t kvTokens,
                              TimePoint leaseUntil) noexcept;

  // Removes the booking of (replica, request), if any, and returns true with it in `out`.
  bool release(std::int64_t replica, RequestId request, ReservationBooking* out = nullptr) noexcept;

  // Moves the lease of every booking of `replica` to `until` (later or earlier). Returns how many
  // bookings it touched.
  std::size_t renew(std::int64_t replica, TimePoint until) noexcept;

  // Removes every booking whose lease is at or before `now`; returns how many it removed.
  std::size_t expire(TimePoint now) noexcept;

  // The live bookings of every replica on `endpoint` (zero when out of range).
  [[nodiscard]] ReservationBooked booked(std::size_t endpoint) const noexcept;

  // The live bookings of one replica on `endpoint` (zero when out of range). Walks the bookings:
  // O(bookings).
  [[nodiscard]] ReservationBooked bookedBy(std::size_t endpoint,
                                           std::int64_t replica) const noexcept;

  // Live bookings in the table.
  [[nodiscard]] std::size_t size() const noexcept;

 private:
  struct Key {
    std::int64_t replica = 0;
    RequestId request = 0;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      return std::hash<std::uint64_t>{}(k.request * 0x9E3779B97F4A7C15ULL ^
                                        static_cast<std::uint64_t>(k.replica));
    }
  };
  void removeLocked(const ReservationBooking& b) HOLDBACK_REQUIRES(mu_);

  const std::size_t endpoints_;  // booked_.size(), fixed at construction (read without the lock)
  mutable Mutex mu_;
  std::vector<ReservationBooked> booked_ HOLDBACK_GUARDED_BY(mu_);
  std::unordered_map<Key, ReservationBooking, KeyHash> bookings_ HOLDBACK_GUARDED_BY(mu_);
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/reservation-inl.hpp"
#endif
