#include "holdback/core/endpoint.hpp"

#include <gtest/gtest.h>

#include "../alloc_counter.hpp"

namespace holdback {
namespace {

TEST(EndpointRoleTest, ParsesTheGoGatewayLabels) {
  EXPECT_EQ(parseEndpointRole(""), EndpointRole::kDecode);
  EXPECT_EQ(parseEndpointRole("both"), EndpointRole::kPrefillDecode);
  EXPECT_EQ(parseEndpointRole("prefill"), EndpointRole::kPrefill);
  EXPECT_EQ(parseEndpointRole("gpu"), EndpointRole::kUnknown);
  EXPECT_EQ(toString(EndpointRole::kEncodePrefillDecode), "encode-prefill-decode");
}

TEST(VectorEndpointSourceTest, ReturnsWhatWasPublished) {
  VectorEndpointSource source(VectorEndpointSource::named(2));
  auto read = source.endpoints(TimePoint{});
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].name, "ep0");
  EXPECT_EQ(read[1].name, "ep1");
  EXPECT_FALSE(read[0].updateTime.has_value());

  source.set({});
  EXPECT_TRUE(source.endpoints(TimePoint{}).empty());
  source.update([](std::vector<Endpoint>& endpoints) {
    endpoints.push_back(Endpoint{.name = "x", .kvCacheUsage = 0.5});
  });
  read = source.endpoints(TimePoint{});
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].kvCacheUsage, 0.5);
  EXPECT_EQ(source.snapshot().size(), 1u);
}

TEST(VectorEndpointSourceTest, StampNowMarksEveryEndpointFresh) {
  VectorEndpointSource source(VectorEndpointSource::named(3),
                              VectorEndpointSource::Freshness::kStampNow);
  const TimePoint now{std::chrono::seconds(42)};
  for (const Endpoint& e : source.endpoints(now)) EXPECT_EQ(e.updateTime, now);
  // The published copy is not stamped.
  EXPECT_FALSE(source.snapshot()[0].updateTime.has_value());
}

// A span handed out stays valid (and unchanged) while another thread publishes: the reader's
// buffer is replaced only by the reader's own next call.
TEST(VectorEndpointSourceTest, PublishingDoesNotTouchTheReadersSpan) {
  VectorEndpointSource source(VectorEndpointSource::named(2));
  const auto before = source.endpoints(TimePoint{});
  source.set(VectorEndpointSource::named(5, "other"));
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[1].name, "ep1");
  EXPECT_EQ(source.endpoints(TimePoint{}).size(), 5u);
}

// The pool given at construction is the reader's from the start, and a read with nothing
// published since the last one takes it as it is: neither the first read nor the later ones copy
// or allocate (a dispatch cycle reads the source every time).
TEST(VectorEndpointSourceTest, ReadsWithoutAPublicationDoNotAllocate) {
  VectorEndpointSource source(VectorEndpointSource::named(4, "a-name-longer-than-sso-"));
  {
    testing::AllocationCounter counter;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(source.endpoints(TimePoint{}).size(), 4u);
    EXPECT_EQ(counter.count(), 0u);
  }
  EXPECT_EQ(source.endpoints(TimePoint{})[3].name, "a-name-longer-than-sso-3");
  source.update([](std::vector<Endpoint>& endpoints) { endpoints.pop_back(); });
  EXPECT_EQ(source.endpoints(TimePoint{}).size(), 3u);
}

}  // namespace
}  // namespace holdback
