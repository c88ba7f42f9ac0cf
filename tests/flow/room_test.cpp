// The pool's room per band, from the detector's per-endpoint room and the bands' declared KV
// footprints, handed to a policy that reads it (DemandView::room; flow/pool_pressure.hpp).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "alloc_counter.hpp"
#include "flow_test_support.hpp"
#include "holdback/core/replica_share.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/flow/pool_pressure.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::request;

// Records the room of the last DemandView it was given; admits everything.
class RoomSpy final : public UsageLimitPolicy {
 public:
  explicit RoomSpy(bool usesRoom) : UsageLimitPolicy("room-spy"), uses_room_(usesRoom) {}
  [[nodiscard]] bool usesDemand() const noexcept override { return true; }
  [[nodiscard]] bool usesRoom() const noexcept override { return uses_room_; }
  [[nodiscard]] std::string_view type() const noexcept override { return "room-spy"; }

  std::size_t roomBands = 0;
  std::array<BandRoom, 4> room{};
  std::array<BandDemand, 4> demand{};

 protected:
  void compute(double, std::span<const Priority>, std::span<double> ceilings) noexcept override {
    for (double& c : ceilings) c = 1.0;
  }
  void computeWithDemand(double, std::span<const Priority>, std::span<double> ceilings,
                         const DemandView& view) noexcept override {
    roomBands = view.room.size();
    for (std::size_t i = 0; i < view.room.size() && i < room.size(); ++i) room[i] = view.room[i];
    for (std::size_t i = 0; i < view.bands.size() && i < demand.size(); ++i) {
      demand[i] = view.bands[i];
    }
    for (double& c : ceilings) c = 1.0;
  }

 private:
  bool uses_room_;
};

// Two endpoints of 16 slots and 10000 KV tokens (hybrid concurrency): endpoint 0 runs 4 requests
// holding 9000 tokens (room for 12 slots, 1000 tokens), endpoint 1 runs 10 holding 2000 (6 slots,
// 8000 tokens).
std::shared_ptr<VectorEndpointSource> kvBoundPool() {
  std::vector<Endpoint> pool = VectorEndpointSource::named(2);
  pool[0].inFlightRequests = 4;
  pool[0].inFlightTokens = 9000;
  pool[1].inFlightRequests = 10;
  pool[1].inFlightTokens = 2000;
  return std::make_shared<VectorEndpointSource>(std::move(pool));
}

std::shared_ptr<SaturationDetector> hybridDetector() {
  return ConcurrencyDetector::create(
             {.mode = ConcurrencyMode::kHybrid, .maxConcurrency = 16, .maxTokenConcurrency = 10000})
      .value();
}

FlowRequest withTokens(const char* flow, Priority priority, std::int64_t tokens) {
  FlowRequest r = request(flow, priority);
  r.kvTokens = tokens;
  return r;
}

// A controller with `policy` over kvBoundPool() and the hybrid detector.
std::unique_ptr<FlowController> controllerOver(std::shared_ptr<UsageLimitPolicy> policy,
                                               testing::Recorder& rec) {
  FlowControllerOptions o;
  o.policy = std::move(policy);
  o.detector = hybridDetector();
  o.endpoints = kvBoundPool();
  o.onOutcome = rec.callback();
  return FlowController::create(std::move(o)).value();
}

TEST(FlowRoomTest, APolicyThatReadsRoomSeesItPerBandInTheProtectedFootprint) {
  auto spy = std::make_shared<RoomSpy>(true);
  testing::Recorder rec;
  auto fc = controllerOver(spy, rec);
  TimePoint now{};
  for (int k = 0; k < 3; ++k) {
    (void)fc->enqueue(withTokens("chat", 100, 640), now);
    (void)fc->enqueue(withTokens("batch", -1, 2800), now);
  }
  (void)fc->dispatchCycle(now);  // declares the footprints: no room in this cycle's view yet
  EXPECT_EQ(spy->roomBands, 0u);
  now += 1ms;
  (void)fc->dispatchCycle(now);
  // The domain: 100, the default band 0 (no request, no footprint) and -1.
  ASSERT_EQ(spy->roomBands, 3u);
  EXPECT_EQ(spy->demand[0].footprintTokens, 640.0);
  EXPECT_EQ(spy->demand[2].footprintTokens, 2800.0);
  // The top band protects nothing: unknown.
  EXPECT_TRUE(std::isnan(spy->room[0].fits));
  // Bands 0 and -1 protect 640-token requests: endpoint 0 has KV for 1, endpoint 1 slots for 6.
  // A request of band 0 declares no footprint: it takes a slot where that costs no room.
  EXPECT_EQ(spy->room[1].fits, 7.0);
  EXPECT_EQ(spy->room[1].fitsAfter, 7.0);
  // A 2800-token batch request fits only on endpoint 1, where it takes one of the 6.
  EXPECT_EQ(spy->room[2].fits, 7.0);
  EXPECT_EQ(spy->room[2].fitsAfter, 6.0);
}

TEST(FlowRoomTest, NoRoomIsComputedForAPolicyThatDoesNotReadIt) {
  auto spy = std::make_shared<RoomSpy>(false);
  testing::Recorder rec;
  auto fc = controllerOver(spy, rec);
  TimePoint now{};
  (void)fc->enqueue(withTokens("chat", 100, 640), now);
  (void)fc->enqueue(withTokens("batch", -1, 2800), now);
  for (int k = 0; k < 3; ++k) {
    (void)fc->dispatchCycle(now);
    now += 1ms;
  }
  EXPECT_EQ(spy->roomBands, 0u);
}

TEST(FlowRoomTest, TheSamplerComputesRoomForTheDeclaredBandsWithoutAllocating) {
  PoolPressureSampler sampler(kvBoundPool(), hybridDetector());
  const TimePoint now{};
  const auto before = sampler.sample(now);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->roomBands, 0u);  // nothing declared
  const std::array<BandFootprint, 2> bands{BandFootprint{50, 640.0, 1280.0},
                                           BandFootprint{-1, 640.0, 2800.0}};
  sampler.setFootprints(bands);
  (void)sampler.sample(now);  // sizes the scratch buffer
  testing::AllocationCounter allocations;
  const auto after = sampler.sample(now);
  EXPECT_EQ(allocations.count(), 0u);
  ASSERT_TRUE(after);
  ASSERT_EQ(after->roomBands, 2u);
  EXPECT_EQ(after->room[0].priority, 50);
  EXPECT_EQ(after->room[0].room.fits, 7.0);
  EXPECT_EQ(after->room[0].room.fitsAfter, 6.0);  // 1280 tokens fit on endpoint 1 only
  EXPECT_EQ(after->room[1].priority, -1);
  EXPECT_EQ(after->room[1].room.fitsAfter, 6.0);
  // More bands than the sample holds: the first kMaxRoomBands.
  std::vector<BandFootprint> many(PoolPressure::kMaxRoomBands + 3, BandFootprint{1, 1.0, 1.0});
  sampler.setFootprints(many);
  EXPECT_EQ(sampler.sample(now)->roomBands, PoolPressure::kMaxRoomBands);
}

// Room past the KV threshold across replicas (flow/pool_pressure.hpp). `endpoints` endpoints of
// 16 slots and 10000 KV tokens, 4 running, KV at 0.75 (the utilization detector's threshold is
// 0.8): 500 tokens below the threshold, 2500 in the whole cache. A 2000-token batch request
// starts there only past the threshold.
std::shared_ptr<VectorEndpointSource> nearThresholdPool(std::size_t endpoints) {
  std::vector<Endpoint> pool = VectorEndpointSource::named(endpoints);
  for (Endpoint& e : pool) {
    e.maxRunningRequests = 16;
    e.runningRequests = 4;
    e.kvCapacityTokens = 10000;
    e.kvCacheUsage = 0.75;
  }
  return std::make_shared<VectorEndpointSource>(std::move(pool),
                                                VectorEndpointSource::Freshness::kStampNow);
}

// Two hours into the controller's clock: step 72000 of ReplicaTurn::kStep (even).
const TimePoint kTurnEpoch = TimePoint{} + 2h;
constexpr Duration kStep = ReplicaTurn::kStep;

TEST(PastThresholdTurnTest, TheSamplerKeepsRoomPastTheThresholdOnlyOnThisReplicasTurn) {
  auto detector = UtilizationDetector::create().value();  // kvStartPastThreshold: on
  PoolPressureSampler sampler(nearThresholdPool(2), std::move(detector));
  sampler.keepEndpointRoom(true);
  std::vector<EndpointRoom> room;
  std::vector<std::uint8_t> waits;
  const auto pastAt = [&](TimePoint now) {
    (void)sampler.sample(now);
    EXPECT_TRUE(sampler.copyEndpointRoom(room, waits));
    std::vector<double> out;
    for (const EndpointRoom& r : room) {
      EXPECT_NEAR(r.kvTokens, 500.0, 1e-6);  // the room below the threshold stays
      out.push_back(r.kvCapacityLeft);
    }
    return out;
  };
  using Past = PoolPressureSampler::PastThreshold;
  const std::vector<double> both{2500.0, 2500.0};
  EXPECT_EQ(pastAt(kTurnEpoch), both);  // kDetector, the default
  sampler.setPastThreshold(Past::kTurn, ReplicaTurn{0, 2});
  EXPECT_EQ(pastAt(kTurnEpoch), (std::vector<double>{2500.0, 0.0}));
  EXPECT_EQ(pastAt(kTurnEpoch + kStep), (std::vector<double>{0.0, 2500.0}));
  sampler.setPastThreshold(Past::kTurn, ReplicaTurn{1, 2});
  EXPECT_EQ(pastAt(kTurnEpoch), (std::vector<double>{0.0, 2500.0}));
  sampler.setPastThreshold(Past::kTurn,
                           ReplicaTurn{1, 2, kStep});  // the shared clock one step ahead
  EXPECT_EQ(pastAt(kTurnEpoch), (std::vector<double>{2500.0, 0.0}));
  sampler.setPastThreshold(Past::kNone);
  EXPECT_EQ(pastAt(kTurnEpoch), (std::vector<double>{0.0, 0.0}));
  sampler.setPastThreshold(Past::kTurn, ReplicaTurn{0, 1});  // one replica: the detector's
  EXPECT_EQ(pastAt(kTurnEpoch), both);
  sampler.setPastThreshold(Past::kDetector);
  EXPECT_EQ(pastAt(kTurnEpoch + kStep), both);
}

TEST(PastThresholdTurnTest, TheReplicaShareDecidesWhoStartsABatchRequestPastTheThreshold) {
  auto spy = std::make_shared<RoomSpy>(true);
  testing::Recorder rec;
  FlowControllerOptions o;
  o.policy = spy;
  o.detector = UtilizationDetector::create().value();
  o.endpoints = nearThresholdPool(1);
  o.onOutcome = rec.callback();
  auto fc = FlowController::create(std::move(o)).value();
  TimePoint now = kTurnEpoch;
  (void)fc->enqueue(withTokens("chat", 100, 400), now);
  (void)fc->enqueue(withTokens("batch", -1, 2000), now);
  (void)fc->dispatchCycle(now);  // declares the footprints
  // The batch band's room after one of its requests starts: it starts past the threshold and
  // takes the one 400-token request's room below it; -infinity: it starts nowhere.
  const auto batchAfter = [&](TimePoint at) {
    (void)fc->dispatchCycle(at);
    EXPECT_EQ(spy->roomBands, 3u);
    return spy->room[2].fitsAfter;
  };
  constexpr double kNowhere = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(batchAfter(now), 0.0);  // one gateway: the detector's room
  ReplicaShare share;
  share.replicas = 2;
  share.rank = 0;
  share.pooledArrivals = true;  // the replica feed
  fc->replicaPort().setShare(share);
  EXPECT_EQ(batchAfter(now), 0.0);               // rank 0's turn on endpoint 0 at an even step
  EXPECT_EQ(batchAfter(now + kStep), kNowhere);  // rank 1's
  EXPECT_EQ(batchAfter(now + 2 * kStep), 0.0);
  share.pooledArrivals = false;  // without the feed: none past the threshold
  fc->replicaPort().setShare(share);
  EXPECT_EQ(batchAfter(now + 2 * kStep), kNowhere);
  fc->replicaPort().setShare(std::nullopt);  // the store failed after several replicas shared: none
  EXPECT_EQ(batchAfter(now + 2 * kStep), kNowhere);
  share.replicas = 1;  // the others are gone: this replica alone, the detector's room
  fc->replicaPort().setShare(share);
  EXPECT_EQ(batchAfter(now + kStep), 0.0);
  fc->replicaPort().setShare(std::nullopt);  // and without a store after that: still alone
  EXPECT_EQ(batchAfter(now + kStep), 0.0);
}

}  // namespace
}  // namespace holdback
