// The reservation rule against its vectors (tests/detector/reservation_vectors.txt, shared with
// the gateway's Redis script) and the in-memory ReservationTable.
#include "holdback/detector/reservation.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace holdback {
namespace {

struct ReservationVector {
  std::string name;
  ReservationRoom room;
  ReservationBooked booked;
  std::int64_t kvTokens = 0;
  bool fits = false;
};

std::vector<ReservationVector> reservationVectors() {
  std::ifstream in(std::string(HOLDBACK_SOURCE_DIR) + "/tests/detector/reservation_vectors.txt");
  std::vector<ReservationVector> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    ReservationVector v;
    int fits = 0;
    row >> v.name >> v.room.slots >> v.room.kvCapacityTokens >> v.room.scrapedSlotsUsed >>
        v.room.scrapedKvUsed >> v.booked.slots >> v.booked.kvTokens >> v.kvTokens >> fits;
    EXPECT_TRUE(row) << "unreadable vector: " << line;
    v.fits = fits == 1;
    out.push_back(v);
  }
  return out;
}

const auto kReservationT0 = TimePoint{} + std::chrono::seconds(100);

TEST(ReservationRule, Vectors) {
  const auto vectors = reservationVectors();
  ASSERT_GE(vectors.size(), 20U);
  for (const auto& v : vectors) {
    EXPECT_EQ(reservationFits(v.room, v.booked, v.kvTokens), v.fits) << v.name;
  }
}

TEST(ReservationRule, IsConstexpr) {
  static_assert(reservationFits(ReservationRoom{2, 100, 1, 50}, ReservationBooked{}, 50));
  static_assert(!reservationFits(ReservationRoom{2, 100, 1, 50}, ReservationBooked{}, 51));
}

TEST(ReservationTable, BooksUntilFullThenRefuses) {
  ReservationTable table(2);
  const ReservationRoom room{2, 1000, 0, 0};
  const TimePoint lease = kReservationT0 + std::chrono::seconds(1);
  EXPECT_TRUE(table.tryReserve(0, room, 1, 10, 400, lease).booked);
  const auto second = table.tryReserve(0, room, 2, 10, 400, lease);  // same id, other replica
  EXPECT_TRUE(second.booked);
  EXPECT_EQ(second.total, (ReservationBooked{2, 800}));
  const auto third = table.tryReserve(0, room, 3, 11, 1, lease);
  EXPECT_FALSE(third.booked);  // no slot left
  EXPECT_EQ(third.total, (ReservationBooked{2, 800}));
  EXPECT_TRUE(table.tryReserve(1, room, 3, 11, 1, lease).booked);  // the other endpoint
  EXPECT_EQ(table.booked(1), (ReservationBooked{1, 1}));
  EXPECT_EQ(table.bookedBy(0, 1), (ReservationBooked{1, 400}));
  EXPECT_EQ(table.size(), 3U);
}

TEST(ReservationTable, KvBindsAndIdleOversizeFits) {
  ReservationTable table(1);
  const ReservationRoom room{8, 1000, 0, 0};
  const TimePoint lease = kReservationT0 + std::chrono::seconds(1);
  EXPECT_TRUE(table.tryReserve(0, room, 0, 1, 5000, lease).booked);  // idle: oversized fits
  EXPECT_FALSE(table.tryReserve(0, room, 0, 2, 1, lease).booked);    // KV over capacity
  EXPECT_TRUE(table.release(0, 1));
  EXPECT_TRUE(table.tryReserve(0, room, 0, 2, 600, lease).booked);
  EXPECT_FALSE(table.tryReserve(0, room, 0, 3, 401, lease).booked);
  EXPECT_TRUE(table.tryReserve(0, room, 0, 3, 400, lease).booked);
}

TEST(ReservationTable, DoubleBookingAndBadEndpointRefused) {
  ReservationTable table(1);
  const ReservationRoom room{8, 0, 0, 0};
  const TimePoint lease = kReservationT0 + std::chrono::seconds(1);
  EXPECT_TRUE(table.tryReserve(0, room, 0, 1, 10, lease).booked);
  EXPECT_FALSE(table.tryReserve(0, room, 0, 1, 10, lease).booked);
  EXPECT_FALSE(table.tryReserve(1, room, 0, 2, 10, lease).booked);
  EXPECT_EQ(table.booked(0), (ReservationBooked{1, 10}));
  EXPECT_EQ(table.booked(7), ReservationBooked{});
}

TEST(ReservationTable, ReleaseReturnsTheBookingOnce) {
  ReservationTable table(2);
  const TimePoint lease = kReservationT0 + std::chrono::seconds(1);
  ASSERT_TRUE(table.tryReserve(1, ReservationRoom{4, 0, 0, 0}, 5, 42, -3, lease).booked);
  ReservationBooking b;
  ASSERT_TRUE(table.release(5, 42, &b));
  EXPECT_EQ(b.endpoint, 1U);
  EXPECT_EQ(b.replica, 5);
  EXPECT_EQ(b.request, 42U);
  EXPECT_EQ(b.kvTokens, 0);  // a negative request books 0
  EXPECT_FALSE(table.release(5, 42));
  EXPECT_EQ(table.booked(1), ReservationBooked{});
}

TEST(ReservationTable, LeasesExpireUnlessRenewed) {
  ReservationTable table(1);
  const ReservationRoom room{8, 0, 0, 0};
  const TimePoint lease = kReservationT0 + std::chrono::milliseconds(60);
  ASSERT_TRUE(table.tryReserve(0, room, 1, 1, 10, lease).booked);
  ASSERT_TRUE(table.tryReserve(0, room, 2, 1, 20, lease).booked);
  EXPECT_EQ(table.expire(lease - std::chrono::milliseconds(1)), 0U);
  EXPECT_EQ(table.renew(1, lease + std::chrono::milliseconds(60)), 1U);
  EXPECT_EQ(table.expire(lease), 1U);  // replica 2's lease ends at `lease`
  EXPECT_EQ(table.booked(0), (ReservationBooked{1, 10}));
  EXPECT_EQ(table.expire(lease + std::chrono::milliseconds(60)), 1U);
  EXPECT_EQ(table.size(), 0U);
  EXPECT_EQ(table.booked(0), ReservationBooked{});
}

}  // namespace
}  // namespace holdback
