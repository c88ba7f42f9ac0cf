// EndpointPicker's one pass (endpoint_picker.hpp, "Cost"): it passes over an endpoint that cannot
// win after one load and asks a detector whose filter decides each endpoint alone about one
// endpoint at a time (the whole pool after 32 such calls). Its picks, cursor included, must be
// those of the rule read eagerly (the whole pool's filter and room, then one pass by the tuple of
// rules 2-6), with and without fitFirst, on pools shaped to take every path: random, the fewest
// in flight last (every endpoint would win: both budgets run out), nothing fits, nothing kept.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "alloc_counter.hpp"
#include "eager_pick_reference.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/detector/endpoint_picker.hpp"

namespace holdback {
namespace {

// A host detector over a utilization detector that counts the filter's calls and the endpoints
// they were asked about; it says its filter decides each endpoint alone when `alone`.
class OnePassCountingDetector final : public SaturationDetector {
 public:
  OnePassCountingDetector(bool alone, bool withRoom)
      : SaturationDetector("counting"),
        inner_(std::move(UtilizationDetector::create({.maxRunningRequests = 8})).value()),
        alone_(alone),
        with_room_(withRoom) {}
  double saturation(std::span<const Endpoint> e, TimePoint now) const noexcept override {
    return inner_->saturation(e, now);
  }
  FilterResult filter(std::span<const Endpoint> e, TimePoint now,
                      std::span<std::size_t> out) const noexcept override {
    ++calls;
    asked += e.size();
    return inner_->filter(e, now, out);
  }
  bool room(std::span<const Endpoint> e, TimePoint now,
            std::span<EndpointRoom> out) const noexcept override {
    return with_room_ && inner_->room(e, now, out);
  }
  bool filtersEachEndpointAlone() const noexcept override { return alone_; }
  std::string_view type() const noexcept override { return "counting"; }

  mutable std::size_t calls = 0;
  mutable std::size_t asked = 0;

 private:
  std::unique_ptr<UtilizationDetector> inner_;
  bool alone_;
  bool with_room_;
};

enum class OnePassShape : std::uint8_t { kRandom, kFewestLast, kNoneFits, kNoneKept };

const TimePoint kOnePassNow = TimePoint{} + std::chrono::hours(1);

// Endpoints for the utilization detector (8 slots, 4096 KV tokens, 200 ms staleness) and the
// concurrency detectors below.
std::vector<Endpoint> onePassPool(std::mt19937& rng, std::size_t n, OnePassShape shape) {
  std::vector<Endpoint> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    Endpoint& e = out[i];
    e.updateTime = kOnePassNow - std::chrono::milliseconds(rng() % 150);
    e.maxRunningRequests = 8;
    e.kvCapacityTokens = 4096;
    e.kvCacheUsage = 0.3;
    switch (shape) {
      case OnePassShape::kRandom:
        e.updateTime = kOnePassNow - std::chrono::milliseconds(rng() % 300);  // some stale
        e.waitingQueueSize = rng() % 7 == 0 ? std::numeric_limits<double>::quiet_NaN()
                                            : static_cast<double>(rng() % 3);
        e.kvCacheUsage = static_cast<double>(rng() % 100) / 100.0;
        e.runningRequests = static_cast<double>(rng() % 9);
        e.inFlightRequests = static_cast<std::int64_t>(rng() % 6);
        e.inFlightTokens = static_cast<std::int64_t>(rng() % 5000);
        break;
      case OnePassShape::kFewestLast:  // each endpoint beats the ones before it; half fit
        e.runningRequests = i % 2 == 0 ? 8.0 : 2.0;
        e.inFlightRequests = static_cast<std::int64_t>(n - i);
        e.inFlightTokens = e.inFlightRequests * 10;
        break;
      case OnePassShape::kNoneFits:  // kept by the filters, no free slot anywhere
        e.runningRequests = 8.0;
        e.inFlightRequests = static_cast<std::int64_t>(rng() % 3);
        e.inFlightTokens = 100;
        break;
      case OnePassShape::kNoneKept:  // KV above the threshold, more in flight than any limit
        e.kvCacheUsage = 0.95;
        e.inFlightRequests = 5000 + static_cast<std::int64_t>(rng() % 4);
        e.inFlightTokens = std::int64_t{1} << 30;
        break;
    }
  }
  return out;
}

void expectOnePassPicksLikeEagerRule(const SaturationDetector& detector, bool fitFirst,
                                     std::uint32_t seed, bool byPriority = false) {
  std::mt19937 rng(seed);
  EndpointPicker picker(0, {.fitFirst = fitFirst, .priorityRouting = byPriority});
  test_support::EagerPickerReference rule;
  for (int round = 0; round < 200; ++round) {
    const auto shape = static_cast<OnePassShape>(round % 4);
    const std::size_t n = 1 + rng() % (round % 5 == 0 ? 1500 : 40);
    const auto endpoints = onePassPool(rng, n, shape);
    std::vector<std::uint8_t> up(n);
    for (auto& u : up) u = rng() % 5 == 0 ? 0 : 1;
    const std::span<const std::uint8_t> ups =
        round % 3 == 0 ? std::span<const std::uint8_t>() : std::span<const std::uint8_t>(up);
    const auto tokens = static_cast<std::int64_t>(rng() % 1500);
    // Priority routing: counts of the request's priority or above, few values (ties) or many.
    std::vector<std::int64_t> above(byPriority ? n : 0);
    for (auto& a : above) a = static_cast<std::int64_t>(rng() % (round % 2 == 0 ? 3 : 400));
    ASSERT_EQ(picker.pick(endpoints, detector, kOnePassNow, ups, tokens, above),
              rule.pick(endpoints, detector, kOnePassNow, ups, tokens, fitFirst, above))
        << detector.name() << " fitFirst " << fitFirst << " seed " << seed << " round " << round
        << " n " << n << " byPriority " << byPriority;
  }
}

void expectOnePassPicksLikeEagerRule(const SaturationDetector& detector) {
  for (const bool fitFirst : {false, true}) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      expectOnePassPicksLikeEagerRule(detector, fitFirst, seed);
      expectOnePassPicksLikeEagerRule(detector, fitFirst, seed, true);  // rule 4a
    }
  }
}

TEST(EndpointPickerOnePassTest, UtilizationDetectorPicksAsTheEagerRule) {
  auto detector = std::move(UtilizationDetector::create({.maxRunningRequests = 8})).value();
  EXPECT_TRUE(detector->filtersEachEndpointAlone());
  expectOnePassPicksLikeEagerRule(*detector);
}

TEST(EndpointPickerOnePassTest, ConcurrencyDetectorsPickAsTheEagerRule) {
  for (const ConcurrencyMode mode :
       {ConcurrencyMode::kRequests, ConcurrencyMode::kTokens, ConcurrencyMode::kHybrid}) {
    // Limits above the fewest-last pool's counts (so it is kept) and below the none-kept one's.
    auto detector =
        std::move(ConcurrencyDetector::create(
                      {.mode = mode, .maxConcurrency = 2000, .maxTokenConcurrency = 40000}))
            .value();
    EXPECT_TRUE(detector->filtersEachEndpointAlone());
    expectOnePassPicksLikeEagerRule(*detector);
  }
}

TEST(EndpointPickerOnePassTest, HostDetectorsPickAsTheEagerRule) {
  for (const bool alone : {false, true}) {
    for (const bool withRoom : {false, true}) {
      const OnePassCountingDetector detector(alone, withRoom);
      EXPECT_EQ(detector.filtersEachEndpointAlone(), alone);
      expectOnePassPicksLikeEagerRule(detector);
    }
  }
}

// The benchmark's shape (bench_detectors.cpp, BM_PickEndpointFitFirst): the fewest in flight
// found every 16 endpoints, and they fit. A detector whose filter decides each endpoint alone is
// asked about a few endpoints, one at a time; any other filters the whole pool once per pick.
TEST(EndpointPickerOnePassTest, AsksTheFilterOnlyAboutEndpointsThatCouldWin) {
  std::vector<Endpoint> endpoints(1024);
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    Endpoint& e = endpoints[i];
    e.updateTime = kOnePassNow;
    e.maxRunningRequests = 8;
    e.kvCapacityTokens = 4096;
    e.kvCacheUsage = 0.3;
    e.runningRequests = static_cast<double>(i % 8);
    e.inFlightRequests = static_cast<std::int64_t>(i % 16);
  }
  for (const bool alone : {false, true}) {
    const OnePassCountingDetector detector(alone, true);
    EndpointPicker picker(endpoints.size(), {.fitFirst = true});
    for (int k = 0; k < 100; ++k) {
      detector.calls = detector.asked = 0;
      const auto picked = picker.pick(endpoints, detector, kOnePassNow, {}, 512);
      ASSERT_TRUE(picked.has_value());
      EXPECT_EQ(endpoints[*picked].inFlightRequests, 0);
      if (alone) {
        EXPECT_EQ(detector.asked, detector.calls) << "one endpoint per call, pick " << k;
        EXPECT_LE(detector.calls, 4u) << "pick " << k;
      } else {
        EXPECT_EQ(detector.calls, 1u);
        EXPECT_EQ(detector.asked, endpoints.size());
      }
    }
  }
}

// Every endpoint would win: 32 calls of one endpoint, then the whole pool in one call.
TEST(EndpointPickerOnePassTest, FiltersTheWholePoolAfter32CallsOfOneEndpoint) {
  std::mt19937 rng(7);
  const auto endpoints = onePassPool(rng, 1024, OnePassShape::kFewestLast);
  const OnePassCountingDetector detector(true, true);
  EndpointPicker picker(0, {.fitFirst = true});
  const auto picked = picker.pick(endpoints, detector, kOnePassNow, {}, 512);
  EXPECT_EQ(picked, 1023u);  // the fewest in flight, and it fits (2 of 8 slots running)
  EXPECT_EQ(detector.calls, 33u);
  EXPECT_EQ(detector.asked, 32u + endpoints.size());
}

// No allocation per pick at 1024 endpoints once the picker's buffers have grown to the pool,
// whichever path the pick takes (the benchmark's shape, both budgets spent, nothing fits,
// nothing kept).
TEST(EndpointPickerOnePassTest, NoAllocationPerFitFirstPickAt1024Endpoints) {
  std::mt19937 rng(11);
  std::vector<std::vector<Endpoint>> pools;
  for (const auto shape : {OnePassShape::kRandom, OnePassShape::kFewestLast,
                           OnePassShape::kNoneFits, OnePassShape::kNoneKept}) {
    pools.push_back(onePassPool(rng, 1024, shape));
  }
  auto utilization = std::move(UtilizationDetector::create({.maxRunningRequests = 8})).value();
  auto hybrid = std::move(ConcurrencyDetector::create({.mode = ConcurrencyMode::kHybrid,
                                                       .maxConcurrency = 2000,
                                                       .maxTokenConcurrency = 40000}))
                    .value();
  const std::vector<std::uint8_t> up(1024, 1);
  EndpointPicker picker(0, {.fitFirst = true});
  auto pickAll = [&] {
    for (const auto& pool : pools) {
      EXPECT_TRUE(picker.pick(pool, *utilization, kOnePassNow, up, 512).has_value());
      EXPECT_TRUE(picker.pick(pool, *hybrid, kOnePassNow, {}, 512).has_value());
    }
  };
  pickAll();  // the buffers grow to the pool
  const testing::AllocationCounter counter;
  for (int k = 0; k < 25; ++k) pickAll();
  EXPECT_EQ(counter.count(), 0u);
}

}  // namespace
}  // namespace holdback
