// Overload protection's parts (overload.hpp): the buffered bytes' budget and the per-address
// connection cap.
#include "overload.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace holdback::gateway {
namespace {

TEST(BufferBudget, ReservesWhatFitsAndGivesItBackWhenTheLeaseEnds) {
  BufferBudget budget(1000);
  BufferBudget::Lease a, b, c;
  ASSERT_TRUE(budget.tryReserve(600, a));
  EXPECT_EQ(budget.used(), 600);
  EXPECT_FALSE(budget.tryReserve(401, b));  // 1001 > 1000
  EXPECT_EQ(b.bytes(), 0);
  EXPECT_EQ(budget.used(), 600);
  ASSERT_TRUE(budget.tryReserve(400, b));  // exactly the limit
  EXPECT_EQ(budget.used(), 1000);
  EXPECT_TRUE(budget.tryReserve(0, c));  // nothing to hold always fits
  a.shrinkTo(100);
  EXPECT_EQ(budget.used(), 500);
  a.shrinkTo(200);  // no growth by shrinking
  EXPECT_EQ(budget.used(), 500);
  a.reset();
  EXPECT_EQ(budget.used(), 400);
  {
    BufferBudget::Lease moved = std::move(b);
    EXPECT_EQ(moved.bytes(), 400);
    EXPECT_EQ(b.bytes(), 0);  // NOLINT(bugprone-use-after-move): the moved-from lease is empty
  }
  EXPECT_EQ(budget.used(), 0);
}

TEST(BufferBudget, AdmittedResponsesGrowPastTheLimitAndBlockNewReservations) {
  BufferBudget budget(1000);
  BufferBudget::Lease response = budget.open();
  response.grow(1500);  // an admitted response is never refused
  EXPECT_EQ(budget.used(), 1500);
  BufferBudget::Lease body;
  EXPECT_FALSE(budget.tryReserve(1, body));
  response.grow(-5);  // ignored
  EXPECT_EQ(response.bytes(), 1500);
  response.reset();
  EXPECT_TRUE(budget.tryReserve(1, body));
}

TEST(BufferBudget, NoOverflowAtExtremes) {
  BufferBudget budget(INT64_MAX);
  BufferBudget::Lease a, b;
  ASSERT_TRUE(budget.tryReserve(INT64_MAX, a));
  EXPECT_FALSE(budget.tryReserve(1, b));
  EXPECT_FALSE(budget.tryReserve(INT64_MAX, b));
  BufferBudget::Lease negative;
  EXPECT_TRUE(budget.tryReserve(-7, negative));  // nothing held
  EXPECT_EQ(negative.bytes(), 0);
}

TEST(BufferBudget, ConcurrentReservationsNeverExceedTheLimit) {
  BufferBudget budget(1000);
  std::atomic<std::int64_t> peak{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        BufferBudget::Lease l;
        if (budget.tryReserve(300, l)) {
          std::int64_t seen = budget.used();
          std::int64_t p = peak.load();
          while (seen > p && !peak.compare_exchange_weak(p, seen)) {
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 1000);
  EXPECT_EQ(budget.used(), 0);
}

TEST(ClientAddressLimit, CapsEachAddressOnItsOwn) {
  ClientAddressLimit limit(2);
  EXPECT_TRUE(limit.tryAdmit("10.0.0.1"));
  EXPECT_TRUE(limit.tryAdmit("10.0.0.1"));
  EXPECT_FALSE(limit.tryAdmit("10.0.0.1"));
  EXPECT_TRUE(limit.tryAdmit("10.0.0.2"));
  EXPECT_EQ(limit.addresses(), 2u);
  limit.leave("10.0.0.1");
  EXPECT_TRUE(limit.tryAdmit("10.0.0.1"));
  limit.leave("10.0.0.2");
  limit.leave("10.0.0.2");  // more leaves than admits: ignored
  limit.leave("never-seen");
  EXPECT_EQ(limit.addresses(), 1u);  // no entry kept for an address with nothing open
  ClientAddressLimit off(0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(off.tryAdmit("10.0.0.1"));
  EXPECT_EQ(off.addresses(), 0u);
}

TEST(DefaultMaxBufferedBytes, IsBetween64MiBAnd8GiB) {
  const std::int64_t d = defaultMaxBufferedBytes();
  EXPECT_GE(d, std::int64_t{64} << 20);
  EXPECT_LE(d, std::int64_t{8} << 30);
}

}  // namespace
}  // namespace holdback::gateway
