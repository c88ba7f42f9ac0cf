// Mixed pools in the detectors and the picker: how endpoints of different sizes weigh in the pool's
// saturation (utilization-detector aggregation mean / capacity / max), each endpoint's own slots in
// the slot term, the concurrency-detector's endpointCapacity, and the picker's rule 4 per slot.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <memory>
#include <vector>

#include "holdback/config/detector_config.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/detector/endpoint_picker.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

const TimePoint kMixedPoolNow = TimePoint{} + 1h;

Endpoint endpoint(std::int64_t slots, double running) {
  Endpoint e;
  e.updateTime = kMixedPoolNow;
  e.maxRunningRequests = slots;
  e.runningRequests = running;
  return e;
}

std::unique_ptr<UtilizationDetector> utilization(Aggregation aggregation) {
  return std::move(
             UtilizationDetector::create({.aggregation = aggregation, .maxRunningRequests = 16}))
      .value();
}

// A large endpoint (64 slots) half busy beside two small ones (8 slots) full: slot term scores
// 0.5, 1, 1.
std::vector<Endpoint> mixedPool() {
  return {endpoint(64, 32), endpoint(8, 8), endpoint(8, 8)};
}

TEST(MixedPoolDetectorTest, MeanWeighsEveryEndpointTheSame) {
  EXPECT_DOUBLE_EQ(utilization(Aggregation::kMean)->saturation(mixedPool(), kMixedPoolNow),
                   (0.5 + 1.0 + 1.0) / 3.0);
}

TEST(MixedPoolDetectorTest, CapacityWeighsEachEndpointBySlots) {
  // (64 x 0.5 + 8 + 8) / 80: the pool's share of busy slots.
  EXPECT_DOUBLE_EQ(utilization(Aggregation::kCapacity)->saturation(mixedPool(), kMixedPoolNow),
                   48.0 / 80.0);
}

TEST(MixedPoolDetectorTest, MaxIsTheWorstEndpoint) {
  EXPECT_DOUBLE_EQ(utilization(Aggregation::kMax)->saturation(mixedPool(), kMixedPoolNow), 1.0);
}

TEST(MixedPoolDetectorTest, CapacityFallsBackToTheSlotTermThenToOne) {
  // Unknown slots take the option's maxRunningRequests (16) as the weight.
  std::vector<Endpoint> pool = {endpoint(48, 48), endpoint(0, 0)};
  EXPECT_DOUBLE_EQ(utilization(Aggregation::kCapacity)->saturation(pool, kMixedPoolNow),
                   48.0 / 64.0);
  // Without a slot term every unknown endpoint weighs 1: the mean.
  auto noSlotTerm =
      std::move(UtilizationDetector::create({.aggregation = Aggregation::kCapacity})).value();
  pool[0].maxRunningRequests = 0;
  pool[0].kvCacheUsage = 0.8;  // score 1
  EXPECT_DOUBLE_EQ(noSlotTerm->saturation(pool, kMixedPoolNow), 0.5);
}

TEST(MixedPoolDetectorTest, OnOneSizeEveryWeightingButMaxIsExactlyTheMean) {
  // Same slots everywhere: capacity is bit for bit the mean (no rounding of c x score / sum c).
  std::vector<Endpoint> pool;
  for (int i = 0; i < 7; ++i) pool.push_back(endpoint(12, static_cast<double>(i) * 1.7));
  const double mean = utilization(Aggregation::kMean)->saturation(pool, kMixedPoolNow);
  EXPECT_EQ(utilization(Aggregation::kCapacity)->saturation(pool, kMixedPoolNow), mean);
}

TEST(MixedPoolDetectorTest, TheSlotTermUsesEachEndpointsOwnSlots) {
  auto d = utilization(Aggregation::kMean);  // option: 16 slots
  EXPECT_DOUBLE_EQ(*d->endpointScore(endpoint(64, 32), kMixedPoolNow),
                   0.5);                                                    // 32 / 64, not 32 / 16
  EXPECT_DOUBLE_EQ(*d->endpointScore(endpoint(0, 8), kMixedPoolNow), 0.5);  // unknown: 8 / 16
}

// endpointCapacity: the slot term for the endpoints whose slots the host knows (the dispatch
// ledger's, learned or configured), without a pool-wide maxRunningRequests; the others score by
// queue and KV as without a slot term.
TEST(MixedPoolDetectorTest, EndpointCapacityTurnsTheSlotTermOnWhereTheSlotsAreKnown) {
  auto own = std::move(UtilizationDetector::create({.endpointCapacity = true})).value();
  auto none = std::move(UtilizationDetector::create({})).value();
  Endpoint full = endpoint(4, 4);  // every slot busy, KV and queue empty
  EXPECT_DOUBLE_EQ(*own->endpointScore(full, kMixedPoolNow), 1.0);
  EXPECT_DOUBLE_EQ(*none->endpointScore(full, kMixedPoolNow), 0.0);
  Endpoint unknown = endpoint(0, 4);
  unknown.kvCacheUsage = 0.4;  // 0.5 of the threshold
  EXPECT_DOUBLE_EQ(*own->endpointScore(unknown, kMixedPoolNow), 0.5);
  std::vector<Endpoint> pool = {full, unknown};
  EXPECT_DOUBLE_EQ(own->saturation(pool, kMixedPoolNow), 0.75);
  // Its running count is then telemetry the endpoint is judged on (strict validation).
  full.runningRequests = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(own->endpointScore(full, kMixedPoolNow).has_value());
  EXPECT_TRUE(none->endpointScore(full, kMixedPoolNow).has_value());
  unknown.runningRequests = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(own->endpointScore(unknown, kMixedPoolNow).has_value());
  // A file sets it; a value that is not a boolean is refused at its path.
  const auto registry = config::builtinDetectorRegistry();
  auto u = config::loadSaturationDetector(
      {{"type", "utilization-detector"}, {"parameters", {{"endpointCapacity", true}}}}, registry);
  ASSERT_TRUE(u.ok()) << u.diagnostics().toString();
  EXPECT_TRUE(dynamic_cast<const UtilizationDetector&>(*u.value()).options().endpointCapacity);
  auto bad = config::loadSaturationDetector(
      {{"type", "utilization-detector"}, {"parameters", {{"endpointCapacity", 1}}}}, registry);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.diagnostics().toString().find("/parameters/endpointCapacity"), std::string::npos)
      << bad.diagnostics().toString();
}

TEST(MixedPoolDetectorTest, ConcurrencyEndpointCapacityTakesEachEndpointsOwn) {
  std::vector<Endpoint> pool(2);
  pool[0].maxRunningRequests = 64;
  pool[0].inFlightRequests = 32;
  pool[1].maxRunningRequests = 8;
  pool[1].inFlightRequests = 8;
  auto configured = std::move(ConcurrencyDetector::create({.maxConcurrency = 16})).value();
  EXPECT_DOUBLE_EQ(configured->saturation(pool, kMixedPoolNow), 40.0 / 32.0);
  auto own =
      std::move(ConcurrencyDetector::create({.maxConcurrency = 16, .endpointCapacity = true}))
          .value();
  EXPECT_DOUBLE_EQ(own->saturation(pool, kMixedPoolNow), 40.0 / 72.0);
  std::size_t out[2] = {9, 9};
  const FilterResult kept = own->filter(pool, kMixedPoolNow, out);
  ASSERT_EQ(kept.kept, 1u);  // the small one is full, the large one has 32 free
  EXPECT_EQ(out[0], 0u);
  EndpointRoom room[2];
  ASSERT_TRUE(own->room(pool, kMixedPoolNow, room));
  EXPECT_DOUBLE_EQ(room[0].slots, 32.0);
  EXPECT_DOUBLE_EQ(room[1].slots, 0.0);
}

TEST(MixedPoolDetectorTest, TheConfigLoaderReadsTheNewParameters) {
  const auto registry = config::builtinDetectorRegistry();
  auto u = config::loadSaturationDetector(
      {{"type", "utilization-detector"}, {"parameters", {{"aggregation", "capacity"}}}}, registry);
  ASSERT_TRUE(u.ok()) << u.diagnostics().toString();
  EXPECT_EQ(dynamic_cast<const UtilizationDetector&>(*u.value()).options().aggregation,
            Aggregation::kCapacity);
  auto c = config::loadSaturationDetector(
      {{"type", "concurrency-detector"}, {"parameters", {{"endpointCapacity", true}}}}, registry);
  ASSERT_TRUE(c.ok()) << c.diagnostics().toString();
  EXPECT_TRUE(dynamic_cast<const ConcurrencyDetector&>(*c.value()).options().endpointCapacity);
  auto bad = config::loadSaturationDetector(
      {{"type", "concurrency-detector"}, {"parameters", {{"endpointCapacity", "yes"}}}}, registry);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.diagnostics().toString().find("/parameters/endpointCapacity"), std::string::npos)
      << bad.diagnostics().toString();
}

TEST(MixedPoolDetectorTest, ThePickerComparesLoadPerSlotWhenEverySlotCountIsKnown) {
  auto d = std::move(ConcurrencyDetector::create({.maxConcurrency = 1000})).value();
  std::vector<Endpoint> pool(2);
  pool[0].maxRunningRequests = 64;
  pool[0].inFlightRequests = 20;  // 0.31 per slot
  pool[1].maxRunningRequests = 8;
  pool[1].inFlightRequests = 4;  // 0.5 per slot
  EndpointPicker picker(2);
  EXPECT_EQ(picker.pick(pool, *d, kMixedPoolNow), 0u);
  // One unknown slot count: the counts themselves.
  pool[1].maxRunningRequests = 0;
  EXPECT_EQ(picker.pick(pool, *d, kMixedPoolNow), 1u);
}

}  // namespace
}  // namespace holdback
