// reservation-holdback-policy's capacity model (policy/reservation.hpp, "Capacity model"): the
// reserve counted in protected requests' footprints that fit on some endpoint, the pooled
// conversion it falls back to, its configuration, and the footprint the demand estimator learns.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "alloc_counter.hpp"
#include "holdback/config/effective_config.hpp"
#include "holdback/config/json.hpp"
#include "holdback/config/policy_config.hpp"
#include "holdback/policy/reservation.hpp"
#include "test_values.hpp"

namespace holdback {
namespace {

using test_support::kInf;
using test_support::kNaN;

// Two bands (100 above -1) whose reserve is exactly minReserve = 4 requests: no Poisson sizing,
// no hold, so the capacity model alone decides.
std::unique_ptr<ReservationPolicy> fixedReserve(ReservationCapacity model) {
  auto made = ReservationPolicy::create({.minCeiling = 0.0,
                                         .minReserve = 4.0,
                                         .holdReserve = false,
                                         .poissonSizing = false,
                                         .capacityModel = model});
  EXPECT_TRUE(made.ok()) << made.diagnostics().toString();
  return std::move(made).value();
}

// The lower band's ceiling at saturation `s` with band 1's room `room` and request unit `unit`.
double lowerCeiling(ReservationPolicy& p, double s, BandRoom room, double unit = kNaN) {
  const std::vector<Priority> prios{100, -1};
  const std::vector<BandDemand> bands(2);
  const std::vector<BandRoom> rooms{BandRoom{}, room};
  DemandView view;
  view.bands = bands;
  view.room = rooms;
  view.requestUnit = unit;
  std::vector<double> ceilings(2);
  p.computeLimit(s, prios, ceilings, view);
  EXPECT_EQ(ceilings[0], 1.0);
  return ceilings[1];
}

TEST(ReservationCapacityTest, EndpointsModeHoldsABandOnlyWhenItsRequestWouldLeaveTooLittleRoom) {
  auto p = fixedReserve(ReservationCapacity::kEndpoints);
  // Room for 10 protected requests; one more low request leaves 5 >= 4: admitted (c > s).
  EXPECT_GT(lowerCeiling(*p, 0.6, {10.0, 5.0}), 0.6);
  EXPECT_GT(lowerCeiling(*p, 0.6, {10.0, 4.0}), 0.6);  // exactly R left: still admitted
  // It would leave 3 < 4: held (c <= s), whatever the pool's saturation.
  EXPECT_LE(lowerCeiling(*p, 0.6, {10.0, 3.0}), 0.6);
  EXPECT_LE(lowerCeiling(*p, 0.1, {10.0, 3.0}), 0.1);
  // It fits on no endpoint: the floor (minCeiling 0).
  EXPECT_EQ(lowerCeiling(*p, 0.6, {10.0, -kInf}), 0.0);
  // Unbounded room (no resource counted): never held below maxCeiling.
  EXPECT_EQ(lowerCeiling(*p, 0.6, {kInf, kInf}), 1.0);
  // At or above saturation 1 the ceiling cannot exceed maxCeiling: gated like static-1.0.
  EXPECT_EQ(lowerCeiling(*p, 1.2, {10.0, 9.0}), 1.0);
}

TEST(ReservationCapacityTest, UnknownRoomFallsBackToThePooledConversion) {
  auto endpoints = fixedReserve(ReservationCapacity::kEndpoints);
  auto pooled = fixedReserve(ReservationCapacity::kPooled);
  // c = 1 - R u = 1 - 4 x 0.01.
  EXPECT_DOUBLE_EQ(lowerCeiling(*endpoints, 0.6, BandRoom{}, 0.01), 0.96);
  EXPECT_DOUBLE_EQ(lowerCeiling(*endpoints, 0.6, {kNaN, 3.0}, 0.01), 0.96);
  // The pooled model ignores the room it is given.
  EXPECT_DOUBLE_EQ(lowerCeiling(*pooled, 0.6, {10.0, 3.0}, 0.01), 0.96);
  EXPECT_DOUBLE_EQ(lowerCeiling(*pooled, 0.6, {10.0, 9.0}, 0.01), 0.96);
  // Neither room nor unit: nothing can be converted, every band gets maxCeiling (as before).
  EXPECT_EQ(lowerCeiling(*endpoints, 0.6, BandRoom{}), 1.0);
  // A view without room (an empty span) is the pooled computation.
  const std::vector<Priority> prios{100, -1};
  const std::vector<BandDemand> bands(2);
  DemandView view;
  view.bands = bands;
  view.requestUnit = 0.01;
  std::vector<double> ceilings(2);
  endpoints->computeLimit(0.6, prios, ceilings, view);
  EXPECT_DOUBLE_EQ(ceilings[1], 0.96);
}

TEST(ReservationCapacityTest, ThePooledUnitWithholdsTheLowerBandsFootprintAndRoomDoesNot) {
  // A KV-bound pool: batch requests in flight at saturation 0.85, u = 0.02 (their mean
  // footprint), room for 12 interactive requests (their KV footprint), 9 of them after one more
  // batch request. A reserve of 9 requests of the pooled unit withholds 9 x 0.02 = 0.18 of the
  // pool: batch is held from 0.82 on. Counted in interactive footprints, 9 still fit after the
  // batch request: it is admitted.
  auto pooled =
      ReservationPolicy::create({.minReserve = 9.0, .holdReserve = false, .poissonSizing = false})
          .value();
  auto endpoints = ReservationPolicy::create({.minReserve = 9.0,
                                              .holdReserve = false,
                                              .poissonSizing = false,
                                              .capacityModel = ReservationCapacity::kEndpoints})
                       .value();
  EXPECT_DOUBLE_EQ(lowerCeiling(*pooled, 0.85, {12.0, 9.0}, 0.02), 0.82);
  EXPECT_GT(lowerCeiling(*endpoints, 0.85, {12.0, 9.0}, 0.02), 0.85);
  EXPECT_LE(lowerCeiling(*endpoints, 0.85, {12.0, 8.0}, 0.02), 0.85);
}

TEST(ReservationCapacityTest, RoomCeilingsAllocateNothingAndStayBoundedOnBadInput) {
  auto p = ReservationPolicy::create({.capacityModel = ReservationCapacity::kEndpoints}).value();
  const std::vector<Priority> prios{100, 50, -1};
  std::vector<BandDemand> bands(3);
  bands[0].arrivalRate = 20.0;
  bands[1].arrivalRate = kNaN;
  bands[2].inFlight = 30.0;
  bands[2].completionRate = 10.0;
  const std::vector<BandRoom> rooms{{kNaN, kNaN}, {-5.0, kInf}, {kInf, -kInf}};
  DemandView view;
  view.bands = bands;
  view.room = rooms;
  view.requestUnit = 1.0 / 64.0;
  view.now = std::chrono::steady_clock::time_point{} + std::chrono::seconds(5);
  std::vector<double> ceilings(3);
  testing::AllocationCounter allocations;
  for (double s : {0.0, 0.5, 1.0, 3.0, kNaN, kInf, -1.0}) {
    p->computeLimit(s, prios, ceilings, view);
    for (double c : ceilings) {
      EXPECT_TRUE(c >= 0.0 && c <= 1.0) << "s " << s << " c " << c;
    }
    EXPECT_GE(ceilings[0], ceilings[1]);
    EXPECT_GE(ceilings[1], ceilings[2]);
  }
  EXPECT_EQ(allocations.count(), 0u);
}

TEST(ReservationCapacityTest, CapacityModelIsConfiguredAndListedInTheEffectiveConfig) {
  Diagnostics diagnostics;
  const config::Json good = config::Json::parse(R"({"capacityModel": "endpoints"})");
  const auto options = config::parseReservationOptions(&good, "/p", diagnostics);
  ASSERT_TRUE(options) << diagnostics.toString();
  EXPECT_EQ(options->capacityModel, ReservationCapacity::kEndpoints);
  EXPECT_EQ(ReservationOptions{}.capacityModel, ReservationCapacity::kPooled);

  Diagnostics bad_diagnostics;
  const config::Json bad = config::Json::parse(R"({"capacityModel": "slots"})");
  EXPECT_FALSE(config::parseReservationOptions(&bad, "/p", bad_diagnostics));
  EXPECT_NE(bad_diagnostics.toString().find("/p/capacityModel"), std::string::npos)
      << bad_diagnostics.toString();

  auto policy = ReservationPolicy::create(*options).value();
  const auto effective = config::effectiveParameters(static_cast<const UsageLimitPolicy&>(*policy));
  EXPECT_EQ(effective.at("capacityModel"), "endpoints");
  EXPECT_EQ(effective.at("sizing"), "refill");
  EXPECT_EQ(effective.at("poissonSizing"), true);
}

TEST(DemandFootprintTest, TheEstimatorAveragesDeclaredFootprints) {
  DemandEstimator e({.footprintSamples = 4.0});
  EXPECT_EQ(e.demand().footprintTokens, 0.0);
  e.arrivedWithFootprint(kNaN);
  e.arrivedWithFootprint(-3.0);
  e.arrivedWithFootprint(0.0);
  e.arrivedWithFootprint(kInf);
  EXPECT_EQ(e.demand().footprintTokens, 0.0);  // nothing declared
  e.arrivedWithFootprint(640.0);
  EXPECT_EQ(e.demand().footprintTokens, 640.0);  // the first declaration
  e.arrivedWithFootprint(1280.0);
  EXPECT_DOUBLE_EQ(e.demand().footprintTokens, 640.0 + 0.25 * 640.0);
}

}  // namespace
}  // namespace holdback
