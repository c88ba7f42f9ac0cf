// detail::LeaseTable (flow/detail/lease_table.hpp): against a std::map model under random
// operations, the walks in dispatch order, bad input, and no allocation once warm.
#include "holdback/flow/detail/lease_table.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "alloc_counter.hpp"

namespace holdback {
namespace {

using detail::LeaseTable;

TimePoint at(int ms) {
  return TimePoint{} + std::chrono::milliseconds(ms);
}

TEST(LeaseTable, AgreesWithAMapUnderRandomOperations) {
  LeaseTable table(4);
  std::map<LeaseTable::Id, std::uint32_t> model;
  std::mt19937_64 rng(7);
  LeaseTable::Id next = 1;
  for (int op = 0; op < 200000; ++op) {
    const bool add = model.size() < 50 || (model.size() < 3000 && rng() % 2 == 0);
    if (add) {
      const auto band = static_cast<std::uint32_t>(rng() % 4);
      ASSERT_TRUE(table.add(next, band, -static_cast<Priority>(band), at(op)));
      model[next++] = band;
    } else {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % model.size()));
      const auto removed = table.remove(it->first);
      ASSERT_TRUE(removed.has_value());
      EXPECT_EQ(removed->band, it->second);
      model.erase(it);
    }
    if (op % 9973 == 0) {
      ASSERT_EQ(table.size(), model.size());
      std::size_t per_band[4] = {};
      for (const auto& [id, band] : model) {
        ++per_band[band];
        ASSERT_NE(table.find(id), nullptr);
      }
      for (std::uint32_t b = 0; b < 4; ++b) EXPECT_EQ(table.inFlight(b), per_band[b]);
    }
  }
  for (const auto& [id, band] : model) EXPECT_TRUE(table.remove(id).has_value());
  EXPECT_EQ(table.size(), 0u);
}

TEST(LeaseTable, WalksInDispatchOrder) {
  LeaseTable table(2);
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(table.add(i, 1, -1, at(i)));
  ASSERT_TRUE(table.remove(3).has_value());
  std::vector<LeaseTable::Id> newest;
  table.newestFirst(1, [&](const LeaseTable::Lease& l) {
    newest.push_back(l.id);
    return true;
  });
  EXPECT_EQ(newest, (std::vector<LeaseTable::Id>{5, 4, 2, 1}));
  std::vector<LeaseTable::Id> oldest;
  table.oldestFirst(1, [&](const LeaseTable::Lease& l) {
    oldest.push_back(l.id);
    return oldest.size() < 2;  // stop early
  });
  EXPECT_EQ(oldest, (std::vector<LeaseTable::Id>{1, 2}));
  table.moveBand(1, 0);
  EXPECT_EQ(table.inFlight(1), 0u);
  EXPECT_EQ(table.inFlight(0), 4u);
  EXPECT_EQ(table.find(5)->band, 0u);
}

TEST(LeaseTable, BadInputChangesNothing) {
  LeaseTable table(1);
  EXPECT_FALSE(table.add(0, 0, 0, at(0)));  // id 0
  EXPECT_FALSE(table.add(1, 1, 0, at(0)));  // band out of range
  EXPECT_TRUE(table.add(1, 0, 0, at(0)));
  EXPECT_FALSE(table.add(1, 0, 0, at(1)));  // duplicate
  EXPECT_EQ(table.find(1)->dispatchedAt, at(0));
  EXPECT_FALSE(table.remove(2).has_value());
  EXPECT_TRUE(table.markRevoked(1));
  EXPECT_FALSE(table.markRevoked(1));
  EXPECT_FALSE(table.markRevoked(9));
  EXPECT_EQ(table.size(), 1u);
  table.newestFirst(7, [](const LeaseTable::Lease&) { return true; });  // out of range: no-op
}

TEST(LeaseTable, SteadyStateDoesNotAllocate) {
  LeaseTable table(3);
  LeaseTable::Id id = 1;
  for (; id <= 1000; ++id) ASSERT_TRUE(table.add(id, id % 3, 0, at(0)));
  for (LeaseTable::Id old = 1; old <= 1000; ++old) ASSERT_TRUE(table.remove(old).has_value());
  testing::AllocationCounter counter;
  for (int round = 0; round < 10000; ++round, ++id) {
    ASSERT_TRUE(table.add(id, id % 3, 0, at(round)));
    if (round >= 500) {
      ASSERT_TRUE(table.remove(id - 500).has_value());
    }
  }
  EXPECT_EQ(counter.count(), 0u);
}

}  // namespace
}  // namespace holdback
