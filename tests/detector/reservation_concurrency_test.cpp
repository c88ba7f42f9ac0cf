// ReservationTable under concurrent replicas: bookings never exceed the endpoint's room.
#include "holdback/detector/reservation.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace holdback {
namespace {

TEST(ReservationTable, ConcurrentReplicasNeverOverbook) {
  ReservationTable table(1);
  const ReservationRoom room{16, 0, 0, 0};
  const TimePoint lease = (TimePoint{} + std::chrono::seconds(100)) + std::chrono::seconds(1);
  std::vector<int> won(4, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      for (RequestId id = 1; id <= 100; ++id) {
        if (table.tryReserve(0, room, r, id, 1, lease).booked) ++won[static_cast<std::size_t>(r)];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won[0] + won[1] + won[2] + won[3], 16);
  EXPECT_EQ(table.booked(0).slots, 16);
}

}  // namespace
}  // namespace holdback
