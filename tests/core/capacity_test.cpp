// Room in slots and KV tokens, counted where it exists (core/capacity.hpp).
#include "holdback/core/capacity.hpp"
#include "test_values.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace holdback {
namespace {

using test_support::kInf;
using test_support::kNaN;

TEST(BandRoomTest, SlotsBindWhenTheKvCacheHasRoom) {
  const std::vector<EndpointRoom> pool{{3.0, kInf}, {3.0, 1e6}};
  const BandRoom r = bandRoom(pool, 640.0, 2800.0);
  EXPECT_EQ(r.fits, 6.0);
  EXPECT_EQ(r.fitsAfter, 5.0);  // one slot taken
}

TEST(BandRoomTest, TheKvCacheBindsWithFreeSlots) {
  // Five free slots each, but KV for 4 and for 1 interactive request of 640 tokens.
  const std::vector<EndpointRoom> pool{{5.0, 3000.0}, {5.0, 1000.0}};
  const BandRoom r = bandRoom(pool, 640.0, 2800.0);
  EXPECT_EQ(r.fits, 5.0);
  // A 2800-token batch request fits only on the first endpoint, where it leaves 200 tokens: it
  // takes the room of all 4 interactive requests there.
  EXPECT_EQ(r.fitsAfter, 1.0);
  // A short request placed where it takes least: the second endpoint (1000 -> 360 tokens: 1).
  EXPECT_EQ(bandRoom(pool, 640.0, 640.0).fitsAfter, 4.0);
}

TEST(BandRoomTest, FragmentsAreNotRoom) {
  // Two endpoints with half a request's KV each have room for none.
  const std::vector<EndpointRoom> pool{{8.0, 320.0}, {8.0, 320.0}};
  const BandRoom r = bandRoom(pool, 640.0, 100.0);
  EXPECT_EQ(r.fits, 0.0);
  EXPECT_EQ(r.fitsAfter, 0.0);
}

TEST(BandRoomTest, ARequestThatFitsNowhereLeavesMinusInfinity) {
  const std::vector<EndpointRoom> pool{{0.0, 1e6}, {4.0, 100.0}};
  const BandRoom r = bandRoom(pool, 50.0, 2800.0);
  EXPECT_EQ(r.fits, 2.0);
  EXPECT_EQ(r.fitsAfter, -kInf);
  EXPECT_EQ(bandRoom({}, 640.0, 640.0).fits, 0.0);
  EXPECT_EQ(bandRoom({}, 640.0, 640.0).fitsAfter, -kInf);
}

TEST(BandRoomTest, BelowAThresholdARequestStartsWhereTheWholeCacheHoldsIt) {
  // Room below a detector's threshold for 1000 tokens, 6000 left in the whole cache.
  const std::vector<EndpointRoom> pool{{5.0, 1000.0, 6000.0}};
  // A 2800-token request starts there and runs past the threshold: no protected room is left
  // there (1 of 640 before).
  BandRoom r = bandRoom(pool, 640.0, 2800.0);
  EXPECT_EQ(r.fits, 1.0);
  EXPECT_EQ(r.fitsAfter, 0.0);
  // Not one the whole cache cannot hold.
  EXPECT_EQ(bandRoom(pool, 640.0, 6001.0).fitsAfter, -kInf);
  // Nor where no room is left below the threshold, whatever the cache holds.
  EXPECT_EQ(bandRoom(std::vector<EndpointRoom>{{5.0, 0.0, 6000.0}}, 640.0, 100.0).fitsAfter, -kInf);
  // Without kvCapacityLeft (a detector with no threshold) the footprint must fit the room.
  EXPECT_EQ(bandRoom(std::vector<EndpointRoom>{{5.0, 1000.0}}, 640.0, 2800.0).fitsAfter, -kInf);
  // It is placed where it takes the least protected room: past the threshold on the first
  // endpoint (1 request's room) rather than below it on the second (3500 - 2800 = 700 tokens
  // left: 4 of its 5).
  const std::vector<EndpointRoom> two{{5.0, 1000.0, 6000.0}, {5.0, 3500.0, 9000.0}};
  r = bandRoom(two, 640.0, 2800.0);
  EXPECT_EQ(r.fits, 6.0);
  EXPECT_EQ(r.fitsAfter, 5.0);
  // Bad figures in kvCapacityLeft count as none.
  EXPECT_EQ(bandRoom(std::vector<EndpointRoom>{{5.0, 1000.0, kNaN}}, 640.0, 2800.0).fitsAfter,
            -kInf);
  EXPECT_EQ(bandRoom(std::vector<EndpointRoom>{{5.0, 1000.0, -1.0}}, 640.0, 2800.0).fitsAfter,
            -kInf);
}

TEST(BandRoomTest, UncountedResourcesAndBadInput) {
  // Neither resource counted: unbounded room, and a request takes none of it.
  const std::vector<EndpointRoom> open{{kInf, kInf}};
  EXPECT_EQ(bandRoom(open, 640.0, 640.0).fits, kInf);
  EXPECT_EQ(bandRoom(open, 640.0, 640.0).fitsAfter, kInf);
  // A footprint <= 0 or NaN needs no KV: slots alone count.
  const std::vector<EndpointRoom> slots{{2.0, 0.0}};
  EXPECT_EQ(bandRoom(slots, 0.0, kNaN).fits, 2.0);
  EXPECT_EQ(bandRoom(slots, kNaN, -5.0).fitsAfter, 1.0);
  // NaN or negative room is none.
  const std::vector<EndpointRoom> broken{{kNaN, 1e6}, {-3.0, 1e6}, {4.0, kNaN}, {4.0, -1.0}};
  const BandRoom r = bandRoom(broken, 640.0, 640.0);
  EXPECT_EQ(r.fits, 0.0);
  EXPECT_EQ(r.fitsAfter, -kInf);
  // Infinite footprints: a protected request of infinite KV fits nowhere the KV is counted;
  // uncounted KV takes any request.
  const std::vector<EndpointRoom> mixed{{3.0, kInf}, {3.0, 1e6}};
  EXPECT_EQ(bandRoom(mixed, kInf, kInf).fits, 3.0);
  EXPECT_EQ(bandRoom(mixed, kInf, kInf).fitsAfter, 2.0);
  EXPECT_EQ(bandRoom(mixed, 640.0, kInf).fits, 6.0);
  EXPECT_EQ(bandRoom(mixed, 640.0, kInf).fitsAfter, 5.0);  // only where KV is uncounted
  // Fractions of a slot do not count.
  EXPECT_EQ(bandRoom(std::vector<EndpointRoom>{{1.9, kInf}}, 1.0, 1.0).fits, 1.0);
}

}  // namespace
}  // namespace holdback
