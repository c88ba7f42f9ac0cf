// reservation-holdback-policy (policy/reservation.hpp) and the demand estimator
// (policy/demand.hpp).
#include "holdback/policy/reservation.hpp"

#include "holdback/config/json.hpp"
#include "holdback/config/policy_config.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "alloc_counter.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;

// The exact reserve: smallest r with P(Poisson(a) >= r) <= eps, summed in log space so that it
// works for any a (the reference the policy's fast path is checked against).
double exactReserve(double a, double eps) {
  if (a <= 0.0) return 1.0;
  double log_pmf = -a;  // k = 0
  double cdf = std::exp(log_pmf);
  double k = 0.0;
  while (cdf < 1.0 - eps) {
    k += 1.0;
    log_pmf += std::log(a) - std::log(k);
    cdf += std::exp(log_pmf);
  }
  return k + 1.0;
}

double reserve(double a, double eps) {
  return ReservationPolicy::poissonReserve(a, eps, ReservationPolicy::inverseNormal(1.0 - eps));
}

std::unique_ptr<ReservationPolicy> make(ReservationOptions options) {
  auto result = ReservationPolicy::create(std::move(options));
  EXPECT_TRUE(result.ok()) << result.diagnostics().toString();
  return std::move(result).value();
}

TEST(ReservationPoisson, MatchesTheDesignNotesWorkedFigures) {
  // ../shared/spec/adaptive-holdback.md section 2.1: r(1.2) = 5 / 7 for eps = 1 % / 0.1 %;
  // r(28) = 36 / 42 / 47 for eps = 10 % / 1 % / 0.1 %.
  EXPECT_EQ(reserve(1.2, 0.01), 5.0);
  EXPECT_EQ(reserve(1.2, 0.001), 7.0);
  EXPECT_EQ(reserve(28.0, 0.10), 36.0);
  EXPECT_EQ(reserve(28.0, 0.01), 42.0);
  EXPECT_EQ(reserve(28.0, 0.001), 47.0);
}

TEST(ReservationPoisson, IdleDemandKeepsOneSlot) {
  EXPECT_EQ(reserve(0.0, 0.01), 1.0);
  EXPECT_EQ(reserve(-3.0, 0.01), 1.0);
  EXPECT_EQ(reserve(std::numeric_limits<double>::quiet_NaN(), 0.01), 1.0);
}

TEST(ReservationPoisson, ExactUpToThirtyAndWithinOneRequestAbove) {
  for (const double eps : {0.2, 0.1, 0.05, 0.01, 0.001, 1e-4}) {
    for (double a = 0.01; a <= 30.0; a += 0.37) {
      EXPECT_EQ(reserve(a, eps), exactReserve(a, eps)) << "a=" << a << " eps=" << eps;
    }
    for (double a = 30.5; a <= 3000.0; a *= 1.07) {
      EXPECT_NEAR(reserve(a, eps), exactReserve(a, eps), 1.0) << "a=" << a << " eps=" << eps;
    }
  }
}

TEST(ReservationPoisson, InverseNormalKnownValues) {
  EXPECT_NEAR(ReservationPolicy::inverseNormal(0.5), 0.0, 1e-9);
  EXPECT_NEAR(ReservationPolicy::inverseNormal(0.99), 2.3263478740, 1e-8);
  EXPECT_NEAR(ReservationPolicy::inverseNormal(0.999), 3.0902323062, 1e-8);
  EXPECT_NEAR(ReservationPolicy::inverseNormal(0.01), -2.3263478740, 1e-8);
}

// The worked example of docs/guide/policies.md: 64 slots (u = 1/64), three bands.
TEST(ReservationPolicy, WorkedExampleSizesEachBandForTheBandsAboveIt) {
  auto policy =
      make({.epsilon = 0.01, .refillHorizon = 0ns, .sizing = ReservationSizing::kOccupancy});
  const std::vector<Priority> priorities{10, 0, -1};
  const std::vector<BandDemand> demand{
      {.occupancy = 1.2, .arrivalRate = 1.0, .holdingTime = 1.17, .inFlight = 1.0},
      {.occupancy = 7.0, .arrivalRate = 3.0, .holdingTime = 2.4, .inFlight = 7.0},
      {.occupancy = 60.0, .arrivalRate = 20.0, .holdingTime = 2.66, .inFlight = 48.0}};
  std::vector<double> ceilings(3, 1.0);
  policy->computeLimit(0.9, priorities, ceilings,
                       DemandView{.bands = demand, .requestUnit = 1.0 / 64});
  EXPECT_DOUBLE_EQ(ceilings[0], 1.0);
  EXPECT_DOUBLE_EQ(ceilings[1], 1.0 - exactReserve(1.2, 0.01) / 64);        // 5 slots
  EXPECT_DOUBLE_EQ(ceilings[2], 1.0 - exactReserve(1.2 + 7.0, 0.01) / 64);  // 17 slots
  // Batch keeps 47 of 64 slots, against stepwise's 32 (1.0 / 0.75 / 0.5).
  EXPECT_NEAR(ceilings[2] * 64, 47.0, 1e-9);
}

TEST(ReservationRefill, ReserveIsTheSmallestRWithRhoToTheRBelowEpsilon) {
  EXPECT_EQ(ReservationPolicy::refillReserve(0.0, 0.01), 1.0);
  EXPECT_EQ(ReservationPolicy::refillReserve(-1.0, 0.01), 1.0);
  EXPECT_EQ(ReservationPolicy::refillReserve(std::numeric_limits<double>::quiet_NaN(), 0.01), 1.0);
  EXPECT_EQ(ReservationPolicy::refillReserve(1e-6, 0.01), 1.0);
  EXPECT_EQ(ReservationPolicy::refillReserve(0.1, 0.01), 2.0);    // 0.1^2 = 0.01
  EXPECT_EQ(ReservationPolicy::refillReserve(0.5, 0.01), 7.0);    // 0.5^7 = 0.0078 < 0.5^6
  EXPECT_EQ(ReservationPolicy::refillReserve(0.5, 0.001), 10.0);  // 0.5^10 = 0.00098
  EXPECT_EQ(ReservationPolicy::refillReserve(1.0, 0.01), INFINITY);
  EXPECT_EQ(ReservationPolicy::refillReserve(INFINITY, 0.01), INFINITY);
  for (const double rho : {0.05, 0.2, 0.37, 0.6, 0.9, 0.99}) {
    const double r = ReservationPolicy::refillReserve(rho, 0.01);
    EXPECT_LE(std::pow(rho, r), 0.01 * (1 + 1e-12)) << rho;
    EXPECT_GT(std::pow(rho, r - 1.0), 0.01) << rho;
  }
}

// docs/guide/policies.md's refill example: 64 slots, the idle window of the simulator's scenario.
TEST(ReservationPolicy, RefillWorkedExampleIdleAndBurst) {
  auto policy = make({.epsilon = 0.01, .minCeiling = 0.5});
  const std::vector<Priority> priorities{10, 0, -1};
  std::vector<BandDemand> demand{
      {.occupancy = 1.2, .arrivalRate = 1.0, .holdingTime = 1.17, .inFlight = 1.0},
      {.occupancy = 7.0, .arrivalRate = 3.0, .holdingTime = 2.4, .inFlight = 7.0},
      {.occupancy = 60.0, .arrivalRate = 20.0, .holdingTime = 2.66, .inFlight = 48.0}};
  // M = 64 x (1 / 1.17 + 7 / 2.4 + 48 / 2.66) / 56 = 24.9 completions/s when full.
  const double m = 64.0 * (1.0 / 1.17 + 7.0 / 2.4 + 48.0 / 2.66) / 56.0;
  std::vector<double> reserves(3);
  policy->reserves(priorities, DemandView{.bands = demand, .requestUnit = 1.0 / 64}, reserves);
  EXPECT_EQ(reserves[1], std::ceil(std::log(0.01) / std::log(1.0 / m)));  // rho 0.04: 2
  EXPECT_EQ(reserves[2], std::ceil(std::log(0.01) / std::log(4.0 / m)));  // rho 0.16: 3
  EXPECT_EQ(reserves[1], 2.0);
  EXPECT_EQ(reserves[2], 3.0);
  std::vector<double> ceilings(3, 1.0);
  policy->computeLimit(0.9, priorities, ceilings,
                       DemandView{.bands = demand, .requestUnit = 1.0 / 64});
  EXPECT_DOUBLE_EQ(ceilings[2], 61.0 / 64);  // batch may fill 61 of 64 slots (stepwise: 32)
  // A burst: 24 interactive arrivals/s. rho = 27 / 37.8 = 0.72: 14 slots kept free.
  demand[0] = {.occupancy = 28.0, .arrivalRate = 24.0, .holdingTime = 1.17, .inFlight = 28.0};
  demand[2].inFlight = 29.0;
  const double burst_m = 64.0 * (28.0 / 1.17 + 7.0 / 2.4 + 29.0 / 2.66) / 64.0;
  policy->computeLimit(1.0, priorities, ceilings,
                       DemandView{.bands = demand, .requestUnit = 1.0 / 64});
  EXPECT_DOUBLE_EQ(ceilings[2], 1.0 - std::ceil(std::log(0.01) / std::log(27.0 / burst_m)) / 64);
  // Higher demand beyond the pool's turnover: batch is held at minCeiling.
  demand[0].arrivalRate = 60.0;
  policy->computeLimit(1.0, priorities, ceilings,
                       DemandView{.bands = demand, .requestUnit = 1.0 / 64});
  EXPECT_DOUBLE_EQ(ceilings[2], 0.5);
  // No completion measured yet and arrivals above: minCeiling too.
  for (BandDemand& d : demand) d.holdingTime = 0.0;
  policy->computeLimit(1.0, priorities, ceilings,
                       DemandView{.bands = demand, .requestUnit = 1.0 / 64});
  EXPECT_DOUBLE_EQ(ceilings[1], 0.5);
}

// The controller's view carries measured completion rates: they, not inFlight / holdingTime,
// give the turnover (the first completions are the shortest requests, so a holding-time
// average starts short); nothing completed yet keeps the bands below at minCeiling.
TEST(ReservationPolicy, RefillTurnoverIsTheMeasuredCompletionRate) {
  auto policy = make({.epsilon = 0.01, .minCeiling = 0.25});
  const std::vector<Priority> priorities{10, -1};
  std::vector<BandDemand> demand{
      {.arrivalRate = 4.0, .holdingTime = 0.2, .inFlight = 8.0, .completionRate = 4.0},
      {.holdingTime = 0.5, .inFlight = 56.0, .completionRate = 16.0}};
  // M = 64 x (4 + 16) / 64 = 20/s (holding times would say 64 x (40 + 112) / 64 = 152/s).
  std::vector<double> reserves(2);
  policy->reserves(priorities, DemandView{.bands = demand, .requestUnit = 1.0 / 64}, reserves);
  EXPECT_EQ(reserves[1], std::ceil(std::log(0.01) / std::log(4.0 / 20.0)));  // 3
  EXPECT_EQ(reserves[1], 3.0);
  // Nothing completed yet, holding times from the first short completions: protective.
  demand[0].completionRate = 1e-9;
  demand[1].completionRate = 1e-9;
  std::vector<double> ceilings(2, 1.0);
  policy->computeLimit(0.9, priorities, ceilings,
                       DemandView{.bands = demand, .requestUnit = 1.0 / 64});
  EXPECT_DOUBLE_EQ(ceilings[1], 0.25);
}

// A gateway replica's own bands are not the pool's turnover: with the others holding the room
// its lower band completes almost nothing, and sized from that it would hold the band at
// minCeiling (and so keep it completing nothing). DemandView::completionRate, the pool's
// completions per replica, replaces the bands' sum.
TEST(ReservationPolicy, AReplicaSizesFromItsShareOfThePoolsTurnover) {
  auto policy = make({.epsilon = 0.01, .minCeiling = 0.25});
  const std::vector<Priority> priorities{10, -1};
  const std::vector<BandDemand> demand{{.arrivalRate = 4.0, .inFlight = 8.0, .completionRate = 1.0},
                                       {.inFlight = 1.0, .completionRate = 0.1}};
  const DemandView alone{.bands = demand, .requestUnit = 1.0 / 9};
  std::vector<double> reserves(2);
  // Its own: M = (1 + 0.1) / (9 x 1/9) = 1.1/s < 4/s arriving above: everything held.
  policy->reserves(priorities, alone, reserves);
  EXPECT_TRUE(std::isinf(reserves[1]));
  std::vector<double> ceilings(2, 1.0);
  policy->computeLimit(0.9, priorities, ceilings, alone);
  EXPECT_DOUBLE_EQ(ceilings[1], 0.25);
  // Its share of the pool's completions, 20/s: rho = 4 / 20, the reserve is 3 requests.
  DemandView shared = alone;
  shared.completionRate = 20.0;
  policy->reserves(priorities, shared, reserves);
  EXPECT_EQ(reserves[1], 3.0);
  ceilings.assign(2, 1.0);
  policy->computeLimit(0.5, priorities, ceilings, shared);
  EXPECT_GT(ceilings[1], 0.25);
  // NaN, negative or infinite: the bands' sum, as without it.
  for (const double bad : {std::nan(""), -1.0, double{INFINITY}}) {
    shared.completionRate = bad;
    policy->reserves(priorities, shared, reserves);
    EXPECT_TRUE(std::isinf(reserves[1])) << bad;
  }
}

TEST(ReservationPolicy, IdleHigherBandsGiveCapacityBack) {
  auto policy = make({.epsilon = 0.001});
  const std::vector<Priority> priorities{10, -1};
  const std::vector<BandDemand> demand{{}, {.occupancy = 60.0, .inFlight = 60.0}};
  std::vector<double> ceilings(2, 1.0);
  policy->computeLimit(0.95, priorities, ceilings,
                       DemandView{.bands = demand, .requestUnit = 1.0 / 64});
  EXPECT_DOUBLE_EQ(ceilings[1], 1.0 - 1.0 / 64);  // one slot for the first interactive arrival
}

TEST(ReservationPolicy, RefillTermCoversArrivalsWhileASlotFrees) {
  auto policy = make({.epsilon = 0.01, .sizing = ReservationSizing::kOccupancy});
  const std::vector<Priority> priorities{10, -1};
  // 50 batch leases of 2.5 s: one ends every 50 ms; 20 req/s arrive above: +1 request.
  const std::vector<BandDemand> demand{{.occupancy = 0.0, .arrivalRate = 20.0},
                                       {.holdingTime = 2.5, .inFlight = 50.0}};
  std::vector<double> reserves(2);
  policy->reserves(priorities, DemandView{.bands = demand}, reserves);
  EXPECT_DOUBLE_EQ(reserves[0], 0.0);
  EXPECT_NEAR(reserves[1], 1.0 + 20.0 * 0.05, 1e-12);
  // A configured horizon replaces the estimate.
  auto fixed =
      make({.epsilon = 0.01, .refillHorizon = 200ms, .sizing = ReservationSizing::kOccupancy});
  fixed->reserves(priorities, DemandView{.bands = demand}, reserves);
  EXPECT_NEAR(reserves[1], 1.0 + 20.0 * 0.2, 1e-12);
}

TEST(ReservationPolicy, BoundsMinReserveAndPerBandEpsilon) {
  auto policy = make({.epsilon = 0.01,
                      .epsilons = {{.priority = -1, .epsilon = 0.001}},
                      .minCeiling = 0.3,
                      .maxCeiling = 0.95,
                      .minReserve = 4.0,
                      .refillHorizon = 0ns,
                      .sizing = ReservationSizing::kOccupancy});
  const std::vector<Priority> priorities{10, 0, -1};
  const std::vector<BandDemand> demand{{.occupancy = 1.2}, {.occupancy = 0.0}, {}};
  std::vector<double> reserves(3);
  policy->reserves(priorities, DemandView{.bands = demand}, reserves);
  EXPECT_EQ(reserves[1], 5.0);                       // r(1.2, 1 %) = 5 > minReserve
  EXPECT_EQ(reserves[2], exactReserve(1.2, 0.001));  // the override: 7
  std::vector<double> ceilings(3, 1.0);
  policy->computeLimit(0.5, priorities, ceilings, DemandView{.bands = demand, .requestUnit = 0.1});
  EXPECT_DOUBLE_EQ(ceilings[0], 0.95);  // maxCeiling
  EXPECT_DOUBLE_EQ(ceilings[1], 0.5);   // 1 - 5 x 0.1
  EXPECT_DOUBLE_EQ(ceilings[2], 0.3);   // 1 - 7 x 0.1 = 0.3 (the floor)
  // Without demand: minReserve below the top band.
  policy->computeLimit(0.5, priorities, ceilings);
  EXPECT_DOUBLE_EQ(ceilings[1], 0.95);  // no request unit known: maxCeiling
  auto with_unit = make({.minReserve = 4.0, .requestUnit = 0.05});
  with_unit->computeLimit(0.5, priorities, ceilings);
  EXPECT_DOUBLE_EQ(ceilings[1], 1.0 - 4 * 0.05);
  EXPECT_DOUBLE_EQ(ceilings[2], 1.0 - 4 * 0.05);
}

// minReserveShare is a floor in pool shares: share / u requests, so the same share keeps the same
// fraction of a pool of any size free; the larger of it and minReserve (and the sizing) applies.
TEST(ReservationPolicy, MinReserveShareFollowsThePoolSize) {
  const std::vector<Priority> priorities{10, 0};
  const std::vector<BandDemand> demand{{}, {}};  // no higher-band demand: r = 1
  std::vector<double> reserves(2);
  std::vector<double> ceilings(2, 1.0);
  auto policy = make({.minReserve = 2.0, .minReserveShare = 0.125, .holdReserve = false});
  for (const double pool : {16.0, 64.0, 256.0}) {
    SCOPED_TRACE(pool);
    policy->reserves(priorities, DemandView{.bands = demand, .requestUnit = 1.0 / pool}, reserves);
    EXPECT_DOUBLE_EQ(reserves[1], std::max(2.0, pool / 8.0));
    policy->computeLimit(0.5, priorities, ceilings,
                         DemandView{.bands = demand, .requestUnit = 1.0 / pool});
    EXPECT_DOUBLE_EQ(ceilings[1], 1.0 - std::max(2.0, pool / 8.0) / pool);
  }
  // Unknown unit: the share cannot be converted; minReserve (and r = 1) remain.
  policy->reserves(priorities, DemandView{.bands = demand}, reserves);
  EXPECT_DOUBLE_EQ(reserves[1], 2.0);
  // The configured requestUnit converts it when the view has none.
  auto configured = make({.minReserveShare = 0.25, .requestUnit = 0.05, .holdReserve = false});
  configured->computeLimit(0.5, priorities, ceilings);
  EXPECT_DOUBLE_EQ(ceilings[1], 0.75);
  // Out of range: reported with its path.
  for (const double bad : {-0.1, 1.0, std::numeric_limits<double>::quiet_NaN()}) {
    Diagnostics diagnostics;
    ReservationPolicy::validate({.minReserveShare = bad}, "/p", diagnostics);
    EXPECT_EQ(diagnostics.errorCount(), 1u) << bad;
    EXPECT_NE(diagnostics.toString().find("/p/minReserveShare"), std::string::npos);
  }
}

TEST(ReservationPolicy, UnknownRequestUnitIsWorkConserving) {
  auto policy = make({});
  const std::vector<Priority> priorities{1, 0};
  const std::vector<BandDemand> demand{{.occupancy = 30.0}, {}};
  std::vector<double> ceilings(2, 0.0);
  for (const double unit : {std::numeric_limits<double>::quiet_NaN(), 0.0, -1.0,
                            std::numeric_limits<double>::infinity()}) {
    policy->computeLimit(0.5, priorities, ceilings,
                         DemandView{.bands = demand, .requestUnit = unit});
    EXPECT_EQ(ceilings[1], 1.0) << unit;
  }
}

TEST(ReservationPolicy, ComputeLimitWithDemandDoesNotAllocate) {
  auto policy = make({.epsilons = {{.priority = 0, .epsilon = 0.1}}});
  std::vector<Priority> priorities(64);
  std::vector<BandDemand> demand(64);
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    priorities[i] = static_cast<Priority>(100 - i);
    demand[i] = {.occupancy = 0.5 * static_cast<double>(i),
                 .arrivalRate = 2.0,
                 .holdingTime = 1.0,
                 .inFlight = 1.0};
  }
  std::vector<double> ceilings(priorities.size(), 1.0);
  testing::AllocationCounter counter;
  policy->computeLimit(0.7, priorities, ceilings,
                       DemandView{.bands = demand, .requestUnit = 0.001});
  EXPECT_EQ(counter.count(), 0u);
  for (std::size_t i = 1; i < ceilings.size(); ++i) EXPECT_LE(ceilings[i], ceilings[i - 1]);
}

// The hold tests: 64 slots (u = 1/64); `now` = epoch means no clock.
using Clock = std::chrono::steady_clock;
const Clock::time_point kT0 = Clock::time_point{} + 100s;

std::vector<double> ceilingsAt(ReservationPolicy& policy, const std::vector<Priority>& priorities,
                               const std::vector<BandDemand>& demand, Clock::time_point now) {
  std::vector<double> ceilings(priorities.size(), 1.0);
  policy.computeLimit(1.0, priorities, ceilings,
                      DemandView{.bands = demand, .requestUnit = 1.0 / 64, .now = now});
  return ceilings;
}

// The top band bursts beyond the pool's turnover (an infinite reserve below it, held as the 32
// requests at which the ceiling is minCeiling 0.5); `lower` are the bands below it.
std::vector<BandDemand> burstOver(std::vector<BandDemand> lower) {
  lower.insert(lower.begin(), {.arrivalRate = 60.0, .inFlight = 30.0, .completionRate = 20.0});
  return lower;
}

// The same figures with the top band idle: a one-request reserve without the hold.
std::vector<BandDemand> idled(std::vector<BandDemand> demand) {
  demand[0].arrivalRate = 0.0;
  return demand;
}

// The hold: a burst's reserve is kept after the burst ends, falling with the admitted band's
// holding time as time constant; it rises again at once.
TEST(ReservationHold, RisesAtOnceAndFallsWithTheBandsHoldingTime) {
  auto policy = make({.epsilon = 0.01, .minCeiling = 0.5});
  const std::vector<Priority> priorities{10, -1};
  const auto burst = burstOver({{.holdingTime = 2.0, .inFlight = 34.0, .completionRate = 10.0}});
  const auto idle = idled(burst);
  const double unit = 1.0 / 64;
  EXPECT_DOUBLE_EQ(ceilingsAt(*policy, priorities, burst, kT0)[1], 0.5);
  // 0.5 s later: held = 1 + 31 e^(-0.5 / 2).
  const double held = 1.0 + 31.0 * std::exp(-0.25);
  EXPECT_NEAR(ceilingsAt(*policy, priorities, idle, kT0 + 500ms)[1], 1.0 - held * unit, 1e-12);
  // The same figures a second time at the same instant: nothing more decays.
  EXPECT_NEAR(ceilingsAt(*policy, priorities, idle, kT0 + 500ms)[1], 1.0 - held * unit, 1e-12);
  // Another 2 s: one more holding time.
  EXPECT_NEAR(ceilingsAt(*policy, priorities, idle, kT0 + 2500ms)[1],
              1.0 - (1.0 + (held - 1.0) * std::exp(-1.0)) * unit, 1e-12);
  // A burst again: at once.
  EXPECT_DOUBLE_EQ(ceilingsAt(*policy, priorities, burst, kT0 + 2600ms)[1], 0.5);
  // A clock that went back holds the reserve (no decay, no overflow); the in-flight cap still
  // applies: 1 + the top band's 30 in flight.
  EXPECT_DOUBLE_EQ(ceilingsAt(*policy, priorities, idle, kT0 - 1000s)[1], 1.0 - 31.0 * unit);
  // Long after: back to the one-slot reserve.
  EXPECT_NEAR(ceilingsAt(*policy, priorities, idle, kT0 + 1000s)[1], 1.0 - unit, 1e-12);
}

// The in-flight cap: what the hold keeps beyond R_i is for the bands above; it never exceeds their
// in-flight count, so once they have drained the reserve falls to R_i at once.
TEST(ReservationHold, TheHeldExcessIsAtMostTheInFlightCountOfTheBandsAbove) {
  auto policy = make({.epsilon = 0.01, .minCeiling = 0.5});
  const std::vector<Priority> priorities{10, -1};
  const auto burst = burstOver({{.holdingTime = 2.0, .inFlight = 34.0, .completionRate = 10.0}});
  const double unit = 1.0 / 64;
  EXPECT_DOUBLE_EQ(ceilingsAt(*policy, priorities, burst, kT0)[1], 0.5);
  // 0.5 s later the hold alone keeps 1 + 31 e^(-0.25) = 25.1 requests; the top band has 5 in
  // flight: 1 + 5.
  auto draining = idled(burst);
  draining[0].inFlight = 5.0;
  EXPECT_NEAR(ceilingsAt(*policy, priorities, draining, kT0 + 500ms)[1], 1.0 - 6.0 * unit, 1e-12);
  // The capped value is what decays from: 3 in flight later is 1 + min(5 e^(-0.05), 3).
  draining[0].inFlight = 3.0;
  EXPECT_NEAR(ceilingsAt(*policy, priorities, draining, kT0 + 600ms)[1], 1.0 - 4.0 * unit, 1e-12);
  // Drained: the one-request reserve at once.
  draining[0].inFlight = 0.0;
  EXPECT_NEAR(ceilingsAt(*policy, priorities, draining, kT0 + 700ms)[1], 1.0 - unit, 1e-12);
  // A burst again: at once.
  EXPECT_DOUBLE_EQ(ceilingsAt(*policy, priorities, burst, kT0 + 800ms)[1], 0.5);
  // While the bands above hold more than the excess, the cap does not bind (the hold alone).
  EXPECT_NEAR(ceilingsAt(*policy, priorities, idled(burst), kT0 + 1300ms)[1],
              1.0 - (1.0 + 31.0 * std::exp(-0.25)) * unit, 1e-12);
  // NaN or negative in-flight figures read as 0: released, not NaN.
  draining[0].inFlight = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NEAR(ceilingsAt(*policy, priorities, draining, kT0 + 1400ms)[1], 1.0 - unit, 1e-12);
}

TEST(ReservationHold, WithoutAClockOrWhenOffTheCeilingsArePure) {
  const std::vector<Priority> priorities{10, -1};
  const auto burst = burstOver({{.holdingTime = 2.0, .inFlight = 34.0, .completionRate = 10.0}});
  auto off = make({.epsilon = 0.01, .minCeiling = 0.5, .holdReserve = false});
  EXPECT_DOUBLE_EQ(ceilingsAt(*off, priorities, burst, kT0)[1], 0.5);
  EXPECT_DOUBLE_EQ(ceilingsAt(*off, priorities, idled(burst), kT0 + 1ms)[1], 63.0 / 64);
  auto on = make({.epsilon = 0.01, .minCeiling = 0.5});
  EXPECT_DOUBLE_EQ(ceilingsAt(*on, priorities, burst, Clock::time_point{})[1], 0.5);
  EXPECT_DOUBLE_EQ(ceilingsAt(*on, priorities, idled(burst), Clock::time_point{})[1], 63.0 / 64);
}

// A lower band never keeps less room than the band above it holds, whatever its own holding time.
TEST(ReservationHold, ALowerBandKeepsAtLeastTheRoomHeldAboveIt) {
  auto policy = make({.epsilon = 0.01, .minCeiling = 0.5});
  const std::vector<Priority> priorities{10, 0, -1};
  const auto burst = burstOver({{.holdingTime = 20.0, .inFlight = 4.0, .completionRate = 1.0},
                                {.holdingTime = 0.1, .inFlight = 30.0, .completionRate = 10.0}});
  EXPECT_DOUBLE_EQ(ceilingsAt(*policy, priorities, burst, kT0)[2], 0.5);
  const auto ceilings = ceilingsAt(*policy, priorities, idled(burst), kT0 + 1s);
  // Band 0 (20 s holding time) still holds about 30 requests; band -1 (0.1 s) alone would hold
  // none of its burst reserve.
  EXPECT_LT(ceilings[1], 0.55);
  EXPECT_DOUBLE_EQ(ceilings[2], ceilings[1]);
}

TEST(ReservationPolicy, EveryInvalidOptionIsReportedWithItsPath) {
  ReservationOptions options{
      .epsilon = 0.7,
      .epsilons = {{.priority = 1, .epsilon = 0.0}, {.priority = 1, .epsilon = 0.1}},
      .minCeiling = 0.9,
      .maxCeiling = 0.8,
      .minReserve = -1.0,
      .refillHorizon = -1ms,
      .requestUnit = 2.0,
      .smoothing = {.rise = 2s, .decay = 1s}};
  Diagnostics diagnostics;
  ReservationPolicy::validate(options, "/plugins/0/parameters", diagnostics);
  const std::string text = diagnostics.toString();
  for (const char* path :
       {"/plugins/0/parameters/epsilon", "/plugins/0/parameters/minCeiling",
        "/plugins/0/parameters/minReserve", "/plugins/0/parameters/refillHorizon",
        "/plugins/0/parameters/requestUnit", "/plugins/0/parameters/decayTime",
        "/plugins/0/parameters/epsilons/1"}) {
    EXPECT_NE(text.find(path), std::string::npos) << path << "\n" << text;
  }
  EXPECT_NE(text.find("listed twice"), std::string::npos) << text;
  EXPECT_EQ(diagnostics.errorCount(), 8u) << text;
  EXPECT_FALSE(ReservationPolicy::create(options).ok());
}

TEST(DemandEstimator, RisesFastDecaysSlowly) {
  DemandEstimator estimator({.rise = 300ms, .decay = 5s});
  // 24 req/s in 1 ms steps (one arrival every ~42 ms), occupancy 28. The rate passes two
  // filters of time constant `rise` (a symmetric average, then the attack): after 1.5 s = 5 rise
  // times it is within 1 - 6 e^-5 = 96 % of the truth.
  double t = 0.0;
  int arrivals = 0;
  for (int step = 1; step <= 1500; ++step) {  // 1.5 s
    t += 0.001;
    const int due = static_cast<int>(t * 24.0);
    estimator.update(0.001, due - arrivals, 28.0, 0.0);
    arrivals = due;
  }
  EXPECT_NEAR(estimator.demand().occupancy, 28.0, 28.0 * 0.01);  // 1 - e^-5 of the way
  EXPECT_NEAR(estimator.demand().arrivalRate, 24.0, 24.0 * 0.06);
  for (int step = 0; step < 1000; ++step) estimator.update(0.001, 0.0, 0.0, 0.0);  // 1 s idle
  EXPECT_GT(estimator.demand().occupancy, 28.0 * 0.75);  // e^-0.2 = 0.82 kept after 1 s
  EXPECT_EQ(estimator.demand().inFlight, 0.0);
}

TEST(DemandEstimator, CompletionRateAveragesOverTheDecayTime) {
  DemandEstimator estimator({.rise = 100ms, .decay = 1s});
  // 20 completions/s: one every 50 ms step.
  for (int step = 0; step < 200; ++step) {
    estimator.completed(std::numeric_limits<double>::quiet_NaN());  // counted, hold ignored
    estimator.update(0.05, 0.0, 10.0, 0.0);
  }
  EXPECT_NEAR(estimator.demand().completionRate, 20.0, 1e-3);
  EXPECT_EQ(estimator.demand().holdingTime, 0.0);
  // They stop: after one decay time about 37 % is left.
  for (int step = 0; step < 20; ++step) estimator.update(0.05, 0.0, 10.0, 0.0);
  EXPECT_NEAR(estimator.demand().completionRate, 20.0 * std::exp(-1.0), 0.01);
}

TEST(DemandEstimator, BadInputIsIgnored) {
  DemandEstimator estimator;
  estimator.update(0.1, 5.0, 3.0, 2.0);
  const BandDemand before = estimator.demand();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  estimator.update(nan, 1.0, 3.0, 2.0);
  estimator.update(-1.0, 1.0, 3.0, 2.0);
  estimator.update(0.0, 1.0, 3.0, 2.0);
  EXPECT_EQ(estimator.demand().occupancy, before.occupancy);
  estimator.update(0.1, nan, -4.0, std::numeric_limits<double>::infinity());
  EXPECT_EQ(estimator.demand().inFlight, 0.0);
  EXPECT_EQ(estimator.demand().queued, 0.0);
  EXPECT_TRUE(std::isfinite(estimator.demand().arrivalRate));
  estimator.completed(2.0);
  EXPECT_EQ(estimator.demand().holdingTime, 2.0);
  estimator.completed(nan);
  estimator.completed(-1.0);
  EXPECT_EQ(estimator.demand().holdingTime, 2.0);
  estimator.completed(4.0);
  EXPECT_NEAR(estimator.demand().holdingTime, 2.0 + 2.0 / 32, 1e-12);
}

}  // namespace
}  // namespace holdback

namespace holdback::config {
namespace {

std::vector<std::string> loadErrors(const std::string& parameters,
                                    std::shared_ptr<UsageLimitPolicy>* out = nullptr) {
  auto parsed =
      parseJson(R"({"type":"reservation-holdback-policy","parameters":)" + parameters + "}");
  EXPECT_TRUE(parsed.ok());
  auto policy = loadUsageLimitPolicy(parsed.value(), builtinPolicyRegistry());
  std::vector<std::string> errors;
  for (const auto& d : policy.diagnostics().errors()) errors.push_back(d.toString());
  if (out != nullptr && policy.ok()) *out = policy.value();
  return errors;
}

TEST(ReservationConfig, LoadsEveryParameter) {
  std::shared_ptr<UsageLimitPolicy> policy;
  EXPECT_TRUE(loadErrors(R"({"epsilon":0.001,"epsilons":{"-1":0.1,"5":0.05},"minCeiling":0.2,
                             "maxCeiling":0.95,"minReserve":2,"minReserveShare":0.1,"refillHorizon":"150ms",
                             "requestUnit":0.015625,"riseTime":"200ms","decayTime":"8s",
                             "holdReserve":false})",
                         &policy)
                  .empty());
  ASSERT_NE(policy, nullptr);
  const auto& options = dynamic_cast<const ReservationPolicy&>(*policy).options();
  EXPECT_EQ(options.epsilon, 0.001);
  ASSERT_EQ(options.epsilons.size(), 2u);
  EXPECT_EQ(options.epsilons[0].priority, 5);  // sorted highest first
  EXPECT_EQ(options.epsilons[1].epsilon, 0.1);
  EXPECT_EQ(options.minCeiling, 0.2);
  EXPECT_EQ(options.maxCeiling, 0.95);
  EXPECT_EQ(options.minReserve, 2.0);
  EXPECT_EQ(options.minReserveShare, 0.1);
  EXPECT_EQ(options.refillHorizon, std::chrono::milliseconds(150));
  EXPECT_EQ(options.requestUnit, 0.015625);
  EXPECT_EQ(options.smoothing.rise, std::chrono::milliseconds(200));
  EXPECT_EQ(options.smoothing.decay, std::chrono::seconds(8));
  EXPECT_FALSE(options.holdReserve);
  EXPECT_TRUE(policy->usesDemand());
}

TEST(ReservationConfig, LoadsSizingAndFeedback) {
  std::shared_ptr<UsageLimitPolicy> policy;
  EXPECT_TRUE(loadErrors(R"({"sizing":"occupancy","poissonSizing":false,
                             "feedback":{"targetWait":"40ms","targets":{"100":"20ms"},
                                         "increase":2,"decrease":0.25,"maxExtra":16,
                                         "interval":"250ms"}})",
                         &policy)
                  .empty());
  ASSERT_NE(policy, nullptr);
  const auto& options = dynamic_cast<const ReservationPolicy&>(*policy).options();
  EXPECT_EQ(options.sizing, ReservationSizing::kOccupancy);
  EXPECT_FALSE(options.poissonSizing);
  EXPECT_TRUE(options.feedback.enabled);
  EXPECT_EQ(options.feedback.targetWait, std::chrono::milliseconds(40));
  ASSERT_EQ(options.feedback.targets.size(), 1u);
  EXPECT_EQ(options.feedback.targets[0].priority, 100);
  EXPECT_EQ(options.feedback.targets[0].wait, std::chrono::milliseconds(20));
  EXPECT_EQ(options.feedback.increase, 2.0);
  EXPECT_EQ(options.feedback.decrease, 0.25);
  EXPECT_EQ(options.feedback.maxExtra, 16.0);
  EXPECT_EQ(options.feedback.interval, std::chrono::milliseconds(250));
  EXPECT_TRUE(loadErrors(R"({"feedback":{"enabled":false}})", &policy).empty());
  EXPECT_FALSE(dynamic_cast<const ReservationPolicy&>(*policy).options().feedback.enabled);
  EXPECT_TRUE(loadErrors("{}", &policy).empty());
  EXPECT_EQ(dynamic_cast<const ReservationPolicy&>(*policy).options().sizing,
            ReservationSizing::kRefill);
}

TEST(ReservationConfig, FeedbackProblemsCarryTheirPaths) {
  const auto errors = loadErrors(
      R"({"sizing":"greedy","poissonSizing":1,
          "feedback":{"targetWait":3,"targets":{"x":"1ms","7":5},"increase":1,"decrease":0,
                      "maxExtra":-1,"interval":"0s","speed":2}})");
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  for (const char* path : {"/parameters/sizing", "/parameters/poissonSizing",
                           "/parameters/feedback/targetWait", "/parameters/feedback/targets/x",
                           "/parameters/feedback/targets/7", "/parameters/feedback/increase",
                           "/parameters/feedback/decrease", "/parameters/feedback/maxExtra",
                           "/parameters/feedback/interval", "/parameters/feedback/speed"}) {
    EXPECT_NE(all.find(std::string(path) + ":"), std::string::npos) << path << "\n" << all;
  }
  EXPECT_FALSE(loadErrors(R"({"feedback":[1]})").empty());
}

TEST(ReservationConfig, DefaultsNeedNoParameters) {
  std::shared_ptr<UsageLimitPolicy> policy;
  EXPECT_TRUE(loadErrors("{}", &policy).empty());
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(dynamic_cast<const ReservationPolicy&>(*policy).options().epsilon, 0.01);
}

TEST(ReservationConfig, EveryProblemAtOnceWithItsPath) {
  const auto errors = loadErrors(
      R"({"epsilon":"x","epsilons":{"high":0.1,"3":true,"4":0.9},"minReserve":-1,
          "refillHorizon":5,"riseTime":"soon","colour":"red"})");
  const std::string all = [&] {
    std::string s;
    for (const auto& e : errors) s += e + "\n";
    return s;
  }();
  for (const char* path :
       {"/parameters/epsilon", "/parameters/epsilons/high", "/parameters/epsilons/3",
        "/parameters/epsilons/4", "/parameters/minReserve", "/parameters/refillHorizon",
        "/parameters/riseTime", "/parameters/colour"}) {
    EXPECT_NE(all.find(std::string(path) + ":"), std::string::npos) << path << "\n" << all;
  }
}

}  // namespace
}  // namespace holdback::config

namespace holdback {
namespace {

using namespace std::chrono_literals;

TEST(ReservationFeedbackTrim, GrowsMultiplicativelyShrinksAdditively) {
  // The trim alone: without the hold, which would keep a shrinking extra a little longer.
  auto made = ReservationPolicy::create({.holdReserve = false,
                                         .poissonSizing = false,
                                         .feedback = {.enabled = true,
                                                      .targetWait = 20ms,
                                                      .targets = {{.priority = 0, .wait = 1s}},
                                                      .increase = 2.0,
                                                      .decrease = 0.5,
                                                      .maxExtra = 6.0,
                                                      .interval = 100ms}});
  ASSERT_TRUE(made.ok()) << made.diagnostics().toString();
  auto policy = std::move(made).value();
  const std::vector<Priority> priorities{10, 0, -1};
  std::vector<BandDemand> demand(3);
  std::vector<double> ceilings(3);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  auto step = [&](std::chrono::nanoseconds at, double interactiveWait, double standardWait) {
    demand[0].waitP95 = interactiveWait;
    demand[1].waitP95 = standardWait;
    policy->computeLimit(0.5, priorities, ceilings,
                         DemandView{.bands = demand, .requestUnit = 0.01, .now = t0 + at});
  };
  step(0ms, 0.05, 0.5);  // interactive over its 20 ms target; standard under its 1 s target
  EXPECT_EQ(policy->feedbackExtra(10), 2.0);  // max(1, 0) x 2
  EXPECT_EQ(policy->feedbackExtra(0), 0.0);
  step(50ms, 0.05, 0.5);  // within the interval: no change
  EXPECT_EQ(policy->feedbackExtra(10), 2.0);
  step(100ms, 0.05, 0.5);
  EXPECT_EQ(policy->feedbackExtra(10), 4.0);
  step(200ms, 0.05, 0.5);
  EXPECT_EQ(policy->feedbackExtra(10), 6.0);  // capped at maxExtra
  // The extra is kept below the band: standard and batch reserve 6 requests for interactive.
  EXPECT_DOUBLE_EQ(ceilings[1], 1.0 - 6 * 0.01);
  EXPECT_DOUBLE_EQ(ceilings[2], 1.0 - 6 * 0.01);
  step(300ms, 0.001, 2.0);  // interactive fine, standard over its target
  EXPECT_EQ(policy->feedbackExtra(10), 5.5);
  EXPECT_EQ(policy->feedbackExtra(0), 2.0);
  EXPECT_DOUBLE_EQ(ceilings[1], 1.0 - 5.5 * 0.01);
  EXPECT_DOUBLE_EQ(ceilings[2], 1.0 - 7.5 * 0.01);
  // Without a clock (now = epoch) the state does not advance.
  policy->computeLimit(0.5, priorities, ceilings, DemandView{.bands = demand, .requestUnit = 0.01});
  EXPECT_EQ(policy->feedbackExtra(10), 5.5);
}

TEST(ReservationFeedbackTrim, InvalidFeedbackOptionsAreReported) {
  Diagnostics diagnostics;
  ReservationPolicy::validate(
      {.feedback = {.enabled = true,
                    .targetWait = -1ms,
                    .targets = {{.priority = 3, .wait = 1ms}, {.priority = 3, .wait = 2ms}},
                    .increase = 1.0,
                    .decrease = 0.0,
                    .maxExtra = -1.0,
                    .interval = 0ms}},
      "", diagnostics);
  const std::string text = diagnostics.toString();
  for (const char* path : {"/feedback/targetWait", "/feedback/increase", "/feedback/decrease",
                           "/feedback/maxExtra", "/feedback/interval", "/feedback/targets/3"}) {
    EXPECT_NE(text.find(std::string(path) + ":"), std::string::npos) << path << "\n" << text;
  }
  EXPECT_EQ(diagnostics.errorCount(), 6u) << text;
}

}  // namespace
}  // namespace holdback
