// detail::ItemPool and detail::IdBufferPool (flow/detail/item_pool.hpp): records of each size come
// back from their own pool, a pool keeps at most kMaxSpareItems (the rest is handed back as
// Retired), a pooled record keeps no payload alive, collect() frees what was not needed since the
// last collection, and once warm neither pool allocates.
#include "holdback/flow/detail/item_pool.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloc_counter.hpp"

namespace holdback {
namespace {

using detail::Item;

// A record of `kind` from the pool, with the kind set (as BandTable::acquire does).
Item* takeItem(detail::ItemPool& pool, Item::Kind kind) {
  Item* item = pool.take(kind);
  item->flags = kind;
  return item;
}

TEST(ItemPool, EachSizeComesBackFromItsOwnPool) {
  detail::ItemPool pool;
  Item* plain = takeItem(pool, Item::kPlain);
  Item* payload = takeItem(pool, Item::kWithPayload);
  Item* full = takeItem(pool, Item::kFullKind);
  EXPECT_EQ(plain->payload(), nullptr);
  ASSERT_NE(payload->payload(), nullptr);
  ASSERT_NE(full->payload(), nullptr);
  detail::Retired freed;
  pool.recycle(plain, freed);
  pool.recycle(payload, freed);
  pool.recycle(full, freed);
  EXPECT_EQ(freed.item, nullptr);
  EXPECT_EQ(pool.size(), 3u);
  EXPECT_EQ(takeItem(pool, Item::kFullKind), full);
  EXPECT_EQ(takeItem(pool, Item::kPlain), plain);
  EXPECT_EQ(takeItem(pool, Item::kWithPayload), payload);
  EXPECT_EQ(pool.size(), 0u);
  for (Item* item : {plain, payload, full}) pool.recycle(item, freed);
}

TEST(ItemPool, KeepsAtMostTheBoundAndDropsPayloads) {
  detail::ItemPool pool;
  std::vector<Item*> taken;
  for (std::size_t i = 0; i < detail::kMaxSpareItems + 10; ++i) {
    taken.push_back(takeItem(pool, Item::kWithPayload));
  }
  const auto held = std::make_shared<int>(1);
  *taken.front()->payload() = held;
  std::size_t retired = 0;
  for (Item* item : taken) {
    detail::Retired freed;
    pool.recycle(item, freed);
    if (freed.item != nullptr) ++retired;  // freed with `freed`
  }
  EXPECT_EQ(retired, 10u);
  EXPECT_EQ(pool.size(), detail::kMaxSpareItems);
  EXPECT_EQ(held.use_count(), 1);  // the pooled record let go of it
}

TEST(ItemPool, CollectFreesWhatWasNotNeededSinceTheLastCollection) {
  detail::ItemPool pool;
  std::vector<Item*> taken;
  for (int i = 0; i < 100; ++i) taken.push_back(takeItem(pool, Item::kPlain));
  detail::Retired unused;
  for (Item* item : taken) pool.recycle(item, unused);
  std::vector<detail::Retired> freed;
  pool.collect(freed);  // the low-water mark starts at zero: nothing to free yet
  EXPECT_TRUE(freed.empty());
  // 30 needed at most since: the other 70 go.
  taken.clear();
  for (int i = 0; i < 30; ++i) taken.push_back(takeItem(pool, Item::kPlain));
  for (Item* item : taken) pool.recycle(item, unused);
  pool.collect(freed);
  EXPECT_EQ(freed.size(), 70u);
  EXPECT_EQ(pool.size(), 30u);
  freed.clear();
  pool.collect(freed);  // none needed since: the rest goes too
  EXPECT_EQ(freed.size(), 30u);
  EXPECT_EQ(pool.size(), 0u);
}

TEST(ItemPool, WarmPoolDoesNotAllocate) {
  detail::ItemPool pool;
  std::vector<Item*> live;
  live.reserve(300);
  detail::Retired freed;
  for (int i = 0; i < 300; ++i) live.push_back(takeItem(pool, static_cast<Item::Kind>(i % 3)));
  for (Item* item : live) pool.recycle(item, freed);
  live.clear();
  testing::AllocationCounter counter;
  for (int round = 0; round < 10000; ++round) {
    live.push_back(takeItem(pool, static_cast<Item::Kind>(round % 3)));
    if (live.size() > 250) {
      pool.recycle(live.front(), freed);
      live.erase(live.begin());
    }
  }
  EXPECT_EQ(counter.count(), 0u);
  for (Item* item : live) pool.recycle(item, freed);
}

TEST(IdBufferPool, ListsAreLastInFirstOutAndWarmBuffersDoNotAllocate) {
  detail::IdBufferPool pool;
  std::uint32_t a = detail::kNoIdBuffer;
  std::uint32_t b = detail::kNoIdBuffer;
  const std::string long_a(64, 'a');
  const std::string long_b(64, 'b');
  pool.keep(a, std::string(long_a));
  pool.keep(b, std::string(long_b));
  pool.keep(a, std::string(long_a + "2"));
  std::string out;
  pool.take(a, out);
  EXPECT_EQ(out, long_a + "2");
  pool.take(b, out);
  EXPECT_EQ(out, long_b);
  pool.take(b, out);  // empty list: unchanged
  EXPECT_EQ(out, long_b);
  EXPECT_EQ(b, detail::kNoIdBuffer);
  std::vector<detail::Retired> freed;
  pool.collect(freed);  // one still in use: kept
  EXPECT_TRUE(freed.empty());
  pool.take(a, out);
  EXPECT_EQ(out, long_a);
  // Warm: a string moves in and out without a new buffer (only its text changes hands).
  std::string text(64, 'x');
  testing::AllocationCounter counter;
  for (int round = 0; round < 1000; ++round) {
    pool.keep(a, std::move(text));
    pool.take(a, text);
  }
  EXPECT_EQ(counter.count(), 0u);
  pool.collect(freed);  // none in use: the array goes
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_FALSE(freed.front().id_buffers.empty());
}

}  // namespace
}  // namespace holdback
