// Implementation of holdback/detector/reservation.hpp: compiled into libholdback by
// src/detector.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/detector/reservation.hpp"

#include <new>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE ReservationReply ReservationTable::tryReserve(
    std::size_t endpoint, const ReservationRoom& room, std::int64_t replica, RequestId request,
    std::int64_t kvTokens, TimePoint leaseUntil) noexcept {
  MutexLock lock(mu_);
  ReservationReply reply;
  if (endpoint >= booked_.size()) return reply;
  reply.total = booked_[endpoint];
  const Key key{replica, request};
  if (bookings_.find(key) != bookings_.end()) return reply;
  if (!reservationFits(room, booked_[endpoint], kvTokens)) return reply;
  const std::int64_t tokens = kvTokens > 0 ? kvTokens : 0;
  // Without exceptions (HOLDBACK_NO_EXCEPTIONS) an allocation failure terminates, as everywhere.
  HOLDBACK_TRY {
    bookings_.emplace(key, ReservationBooking{endpoint, replica, request, tokens, leaseUntil});
  }
  HOLDBACK_CATCH_ALL {
    return reply;
  }
  ReservationBooked& b = booked_[endpoint];
  b.slots += 1;
  b.kvTokens += tokens;
  reply.booked = true;
  reply.total = b;
  return reply;
}

HOLDBACK_INLINE void ReservationTable::removeLocked(const ReservationBooking& b) {
  ReservationBooked& t = booked_[b.endpoint];
  t.slots -= 1;
  t.kvTokens -= b.kvTokens;
}

HOLDBACK_INLINE bool ReservationTable::release(std::int64_t replica, RequestId request,
                                               ReservationBooking* out) noexcept {
  MutexLock lock(mu_);
  const auto it = bookings_.find(Key{replica, request});
  if (it == bookings_.end()) return false;
  removeLocked(it->second);
  if (out != nullptr) *out = it->second;
  bookings_.erase(it);
  return true;
}

HOLDBACK_INLINE std::size_t ReservationTable::renew(std::int64_t replica,
                                                    TimePoint until) noexcept {
  MutexLock lock(mu_);
  std::size_t n = 0;
  for (auto& [key, booking] : bookings_) {
    if (key.replica != replica) continue;
    booking.leaseUntil = until;
    ++n;
  }
  return n;
}

HOLDBACK_INLINE std::size_t ReservationTable::expire(TimePoint now) noexcept {
  MutexLock lock(mu_);
  std::size_t n = 0;
  for (auto it = bookings_.begin(); it != bookings_.end();) {
    if (it->second.leaseUntil <= now) {
      removeLocked(it->second);
      it = bookings_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

HOLDBACK_INLINE ReservationBooked ReservationTable::booked(std::size_t endpoint) const noexcept {
  MutexLock lock(mu_);
  return endpoint < booked_.size() ? booked_[endpoint] : ReservationBooked{};
}

HOLDBACK_INLINE ReservationBooked ReservationTable::bookedBy(std::size_t endpoint,
                                                             std::int64_t replica) const noexcept {
  MutexLock lock(mu_);
  ReservationBooked out;
  for (const auto& [key, booking] : bookings_) {
    if (key.replica != replica || booking.endpoint != endpoint) continue;
    out.slots += 1;
    out.kvTokens += booking.kvTokens;
  }
  return out;
}

HOLDBACK_INLINE std::size_t ReservationTable::size() const noexcept {
  MutexLock lock(mu_);
  return bookings_.size();
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
