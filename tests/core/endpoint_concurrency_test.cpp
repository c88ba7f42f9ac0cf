// VectorEndpointSource under concurrent publishers; run under ThreadSanitizer by scripts/test.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "holdback/core/endpoint.hpp"

namespace holdback {
namespace {

TEST(VectorEndpointSourceTest, ConcurrentPublishersAndOneReader) {
  VectorEndpointSource source(VectorEndpointSource::named(1));
  constexpr int kReads = 2000;
  std::atomic<int> reads{0};
  std::thread writer([&] {
    // At least 2000 publications, and on until the reader is done.
    for (int i = 0; i < 2000 || reads.load() < kReads; ++i) {
      source.update([i](std::vector<Endpoint>& endpoints) {
        endpoints.resize(static_cast<std::size_t>(i % 4));
        for (Endpoint& e : endpoints) e.inFlightRequests = i;
      });
    }
  });
  for (; reads.load() < kReads; reads.fetch_add(1)) {
    const auto read = source.endpoints(TimePoint{});
    // Every endpoint of one read comes from the same publication.
    for (const Endpoint& e : read) EXPECT_EQ(e.inFlightRequests, read[0].inFlightRequests);
  }
  writer.join();
}

}  // namespace
}  // namespace holdback
