// The built-in detectors: every vector of the reference §4.2 (utilization) and §4.3
// (concurrency), the hardening rules for bad telemetry, and no allocation on the hot paths.
#include "holdback/detector/detectors.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "go_detector_vectors.hpp"
#include "test_values.hpp"

namespace holdback {
namespace {

using std::chrono::milliseconds;

constexpr double kTolerance = 1e-4;
using test_support::kInf;
using test_support::kNaN;
const TimePoint kNow = TimePoint{} + std::chrono::hours(1000);

// An endpoint with metrics taken `age` before kNow.
Endpoint metrics(double queue, double kv, Duration age = Duration::zero(), std::string name = "e") {
  Endpoint e;
  e.name = std::move(name);
  e.waitingQueueSize = queue;
  e.kvCacheUsage = kv;
  e.updateTime = kNow - age;
  return e;
}

Endpoint noMetrics() {
  Endpoint e;
  e.name = "nil";
  return e;
}

// The reference's behaviour (upstream-reference.md §4.2) on top of `options`: reference telemetry
// validation and no cap on an endpoint's score.
UtilizationDetectorOptions reference(UtilizationDetectorOptions options) {
  const UtilizationDetectorOptions r = UtilizationDetector::referenceOptions();
  options.telemetryValidation = r.telemetryValidation;
  options.endpointScoreCap = r.endpointScoreCap;
  return options;
}

std::unique_ptr<UtilizationDetector> utilization(UtilizationDetectorOptions options) {
  auto made = UtilizationDetector::create(options);
  EXPECT_TRUE(made.ok()) << made.diagnostics().toString();
  return std::move(made).value();
}

// The indices kept and whether the filter failed open.
struct Filtered {
  std::vector<std::size_t> kept;
  bool failOpen = false;
};

Filtered filterOf(const SaturationDetector& d, const std::vector<Endpoint>& endpoints,
                  TimePoint now = kNow) {
  std::vector<std::size_t> out(endpoints.size(), 999);
  const FilterResult r = d.filter(endpoints, now, out);
  out.resize(r.kept);
  return {out, r.failOpen};
}

// ---- utilization-detector: reference §4.2 saturation vectors ---------------------------------

TEST(UtilizationDetectorTest, ReferenceSaturationVectors) {
  auto d = utilization(reference({.queueDepthThreshold = 5,
                                  .kvCacheUtilThreshold = 0.9,
                                  .metricsStalenessThreshold = milliseconds(100)}));
  for (const auto& v : test_support::goUtilizationSaturationVectors(kNow)) {
    EXPECT_NEAR(d->saturation(v.endpoints, kNow), v.expected, kTolerance) << v.label;
  }
}

TEST(UtilizationDetectorTest, StalenessIsStrictlyGreater) {
  auto d = utilization({.queueDepthThreshold = 5,
                        .kvCacheUtilThreshold = 0.9,
                        .metricsStalenessThreshold = milliseconds(100)});
  // Exactly 100 ms old is still fresh: 1/5 = 0.2; one nanosecond more is stale.
  EXPECT_DOUBLE_EQ(d->saturation({{metrics(1, 0.1, milliseconds(100))}}, kNow), 0.2);
  EXPECT_EQ(d->saturation({{metrics(1, 0.1, milliseconds(100) + Duration(1))}}, kNow), 1.0);
}

TEST(UtilizationDetectorTest, FutureUpdateTimeFreshWithinThresholdInvalidBeyond) {
  auto d = utilization({.metricsStalenessThreshold = milliseconds(100)});
  // 50 ms and exactly 100 ms in the future: a scrape that landed after `now` was read.
  EXPECT_DOUBLE_EQ(d->saturation({{metrics(1, 0.0, -milliseconds(50))}}, kNow), 0.2);
  EXPECT_DOUBLE_EQ(d->saturation({{metrics(1, 0.0, -milliseconds(100))}}, kNow), 0.2);
  // Further in the future: invalid, scores 1.0 and is filtered out.
  const std::vector<Endpoint> future{metrics(1, 0.0, -milliseconds(101), "future"),
                                     metrics(1, 0.0, Duration::zero(), "ok")};
  EXPECT_DOUBLE_EQ(d->saturation(std::span(future).first(1), kNow), 1.0);
  EXPECT_EQ(filterOf(*d, future).kept, (std::vector<std::size_t>{1}));
}

TEST(UtilizationDetectorTest, InvalidTelemetryScoresOne) {
  auto d = utilization({});
  for (const double bad : {kNaN, kInf, -kInf, -1.0, -1e-300}) {
    EXPECT_EQ(d->saturation({{metrics(bad, 0.1)}}, kNow), 1.0) << bad;
    EXPECT_EQ(d->saturation({{metrics(1, bad)}}, kNow), 1.0) << bad;
    // Does not poison the mean: (1.0 + 0.0) / 2.
    EXPECT_EQ(d->saturation({{metrics(bad, bad), metrics(0, 0)}}, kNow), 0.5) << bad;
  }
}

TEST(UtilizationDetectorTest, ExtremeTimestampsDoNotOverflow) {
  auto d = utilization({});
  Endpoint e = metrics(0, 0);
  e.updateTime = TimePoint::min();
  EXPECT_EQ(d->saturation({{e}}, TimePoint::max()), 1.0);
  e.updateTime = TimePoint::max();
  EXPECT_EQ(d->saturation({{e}}, TimePoint::min()), 1.0);
  EXPECT_EQ(d->observe(e, TimePoint::min()), UtilizationDetector::Observation::kInvalid);
  e.updateTime = TimePoint::min();
  EXPECT_EQ(d->observe(e, TimePoint::max()), UtilizationDetector::Observation::kInvalid);
}

TEST(UtilizationDetectorTest, HugeTelemetryStaysFinite) {
  auto d =
      utilization(reference({.kvCacheUtilThreshold = std::numeric_limits<double>::denorm_min()}));
  const double s = d->saturation(
      {{metrics(std::numeric_limits<double>::max(), std::numeric_limits<double>::max()),
        metrics(std::numeric_limits<double>::max(), 1.0)}},
      kNow);
  EXPECT_TRUE(std::isfinite(s));
  EXPECT_EQ(s, UtilizationDetector::kMaxScore);
}

TEST(UtilizationDetectorTest, NegativeZeroReadsPositiveZero) {
  auto d = utilization({});
  const double s = d->saturation({{metrics(-0.0, -0.0)}}, kNow);
  EXPECT_EQ(s, 0.0);
  EXPECT_FALSE(std::signbit(s));
}

// ---- aggregation and staleness policy ---------------------------------------------------------

TEST(UtilizationDetectorTest, MaxAggregationTakesTheMostLoadedEndpoint) {
  auto d = utilization(reference({.queueDepthThreshold = 5,
                                  .kvCacheUtilThreshold = 0.9,
                                  .metricsStalenessThreshold = milliseconds(100),
                                  .aggregation = Aggregation::kMax}));
  EXPECT_DOUBLE_EQ(d->saturation({{metrics(1, 0.1), metrics(15, 0.2), metrics(0, 0)}}, kNow), 3.0);
  EXPECT_EQ(d->saturation({{metrics(0, 0), noMetrics()}}, kNow), 1.0);
  EXPECT_EQ(d->saturation({}, kNow), 1.0);
}

TEST(UtilizationDetectorTest, WeightedAggregationByCapacity) {
  auto d = utilization({.queueDepthThreshold = 10,
                        .kvCacheUtilThreshold = 1.0,
                        .aggregation = Aggregation::kWeighted});
  Endpoint h100 = metrics(0, 0.2, Duration::zero(), "h100");
  h100.weight = 4.0;
  Endpoint l4 = metrics(0, 1.0, Duration::zero(), "l4");
  l4.weight = 1.0;
  // (4 * 0.2 + 1 * 1.0) / 5 = 0.36 (the unweighted mean would read 0.6).
  EXPECT_NEAR(d->saturation({{h100, l4}}, kNow), 0.36, 1e-12);
  // An invalid weight counts as 1.0; all-zero weights read 1.0 (no capacity).
  for (const double bad : {kNaN, kInf, -2.0}) {
    h100.weight = bad;
    EXPECT_NEAR(d->saturation({{h100, l4}}, kNow), 0.6, 1e-12) << bad;
  }
  h100.weight = 0.0;
  l4.weight = 0.0;
  EXPECT_EQ(d->saturation({{h100, l4}}, kNow), 1.0);
  // A zero-weight endpoint contributes nothing.
  l4.weight = 1.0;
  EXPECT_NEAR(d->saturation({{h100, l4}}, kNow), 1.0, 1e-12);
}

TEST(UtilizationDetectorTest, IgnoreStalenessPolicyDropsStaleEndpoints) {
  auto d = utilization(reference({.queueDepthThreshold = 5,
                                  .kvCacheUtilThreshold = 0.9,
                                  .metricsStalenessThreshold = milliseconds(100),
                                  .stalenessPolicy = StalenessPolicy::kIgnore}));
  // (0.2) alone, instead of (0.2 + 1.0) / 2.
  EXPECT_DOUBLE_EQ(d->saturation({{metrics(1, 0.1), metrics(0, 0.2, milliseconds(300))}}, kNow),
                   0.2);
  // No metrics counts as stale; an all-stale pool reads 0.0 (fails open).
  EXPECT_EQ(d->saturation({{noMetrics(), metrics(9, 0.9, milliseconds(300))}}, kNow), 0.0);
  // Reference validation: invalid telemetry is not staleness, it still scores 1.0.
  EXPECT_EQ(d->saturation({{metrics(kNaN, 0.1), noMetrics()}}, kNow), 1.0);
  EXPECT_EQ(d->saturation({{metrics(1, 0.1, -milliseconds(500))}}, kNow), 1.0);
  // The empty pool still reads 1.0.
  EXPECT_EQ(d->saturation({}, kNow), 1.0);
}

// ---- strict telemetry, the score cap, the slot term ------------------------------------------

TEST(UtilizationDetectorTest, StrictTelemetryTreatsOutOfRangeReadingsLikeStale) {
  auto saturated = utilization({.metricsStalenessThreshold = milliseconds(100)});
  EXPECT_EQ(saturated->options().telemetryValidation, TelemetryValidation::kStrict);
  // KV usage reported as a percentage (50 instead of 0.5): invalid, not a score of 62.5.
  EXPECT_EQ(saturated->observe(metrics(0, 50.0), kNow), UtilizationDetector::Observation::kInvalid);
  EXPECT_EQ(saturated->observe(metrics(0, 1.0), kNow), UtilizationDetector::Observation::kFresh);
  // stalenessPolicy saturated: scores 1.0 like a stale endpoint; the idle one keeps the mean at
  // 0.5.
  EXPECT_EQ(saturated->saturation({{metrics(0, 50.0), metrics(0, 0)}}, kNow), 0.5);
  EXPECT_FALSE(saturated->endpointScore(metrics(0, 50.0), kNow));
  // stalenessPolicy ignore: it leaves the aggregate, as a stale endpoint would.
  auto ignore = utilization({.stalenessPolicy = StalenessPolicy::kIgnore});
  for (const double bad : {50.0, 1.0000001, kNaN, kInf, -1.0}) {
    EXPECT_EQ(ignore->saturation({{metrics(0, bad), metrics(0, 0.4)}}, kNow), 0.5) << bad;
  }
  for (const double bad : {kNaN, kInf, -1.0}) {
    EXPECT_EQ(ignore->saturation({{metrics(bad, 0.1), metrics(0, 0.4)}}, kNow), 0.5) << bad;
  }
  // ... and is never kept by the filter.
  EXPECT_EQ(filterOf(*ignore, {metrics(0, 50.0), metrics(0, 0.4)}).kept,
            (std::vector<std::size_t>{1}));
  // The reference's behaviour is one switch away: KV 50 scores 62.5 and closes the pool.
  auto ref = utilization(reference({.stalenessPolicy = StalenessPolicy::kIgnore}));
  EXPECT_DOUBLE_EQ(ref->saturation({{metrics(0, 50.0), metrics(0, 0)}}, kNow), 62.5 / 2);
  EXPECT_EQ(ref->saturation({{metrics(kNaN, 0.1), metrics(0, 0)}}, kNow), 0.5);
}

TEST(UtilizationDetectorTest, ScoreCapKeepsOneOverloadedEndpointFromClosingThePool) {
  // One server with 8 waiting requests (score 1.6) and three idle ones.
  const std::vector<Endpoint> pool{metrics(8, 0.3), metrics(0, 0), metrics(0, 0), metrics(0, 0)};
  auto capped = utilization({});
  EXPECT_EQ(capped->options().endpointScoreCap, 1.0);
  EXPECT_DOUBLE_EQ(capped->saturation(pool, kNow), 0.25);
  // Two endpoints, one overloaded ten times over: still half the pool's capacity.
  EXPECT_DOUBLE_EQ(capped->saturation({{metrics(50, 0.3), metrics(0, 0)}}, kNow), 0.5);
  // The overload stays visible in the endpoint's own figure.
  EXPECT_DOUBLE_EQ(*capped->endpointScore(pool[0], kNow), 1.6);
  // A whole overloaded pool still reads saturated (>= every ceiling).
  EXPECT_EQ(capped->saturation({{metrics(8, 0), metrics(9, 0)}}, kNow), 1.0);
  // Weighted and max aggregation are capped too.
  auto max = utilization({.aggregation = Aggregation::kMax});
  EXPECT_EQ(max->saturation(pool, kNow), 1.0);
  // Reference (uncapped): (1.6 + 0 + 0 + 0) / 4 = 0.4, and 25.0 for the two-endpoint pool.
  auto ref = utilization(reference({}));
  EXPECT_DOUBLE_EQ(ref->saturation(pool, kNow), 0.4);
  EXPECT_DOUBLE_EQ(ref->saturation({{metrics(50, 0.3), metrics(0, 0)}}, kNow), 5.0);
  // Another cap value.
  auto two = utilization({.endpointScoreCap = 2.0});
  EXPECT_DOUBLE_EQ(two->saturation({{metrics(50, 0.3), metrics(0, 0)}}, kNow), 1.0);
}

TEST(UtilizationDetectorTest, SlotTermIsOffByDefaultAndReadsRunningOverMaxRunning) {
  Endpoint e = metrics(0, 0.4);  // KV score 0.5
  e.runningRequests = 12;
  auto off = utilization({});
  EXPECT_DOUBLE_EQ(off->saturation({{e}}, kNow), 0.5);
  auto on =
      utilization({.maxRunningRequests = 16, .endpointScoreCap = UtilizationDetector::kUncapped});
  EXPECT_DOUBLE_EQ(on->saturation({{e}}, kNow), 0.75);
  e.runningRequests = 16;  // every slot taken: saturated although the queue is empty
  EXPECT_DOUBLE_EQ(on->saturation({{e}}, kNow), 1.0);
  e.runningRequests = 4;  // KV dominates again
  EXPECT_DOUBLE_EQ(on->saturation({{e}}, kNow), 0.5);
  // Strict validation checks the running count only when the slot term reads it.
  e.runningRequests = kNaN;
  EXPECT_EQ(on->observe(e, kNow), UtilizationDetector::Observation::kInvalid);
  EXPECT_EQ(off->observe(e, kNow), UtilizationDetector::Observation::kFresh);
  // Reference validation: a NaN running count is ignored by the slot term.
  auto ref = utilization(reference({.maxRunningRequests = 16}));
  EXPECT_DOUBLE_EQ(ref->saturation({{e}}, kNow), 0.5);
}

TEST(UtilizationDetectorTest, CreateRejectsInvalidIssue14Options) {
  const auto errorsOf = [](UtilizationDetectorOptions options) {
    std::vector<std::string> out;
    auto made = UtilizationDetector::create(options);
    for (const auto& d : made.diagnostics().errors()) out.push_back(d.toString());
    return out;
  };
  using S = std::vector<std::string>;
  EXPECT_EQ(errorsOf({.maxRunningRequests = -1}),
            S{"/maxRunningRequests: -1 is negative; expected an integer >= 0 (0 = no slot term)"});
  EXPECT_EQ(
      errorsOf({.endpointScoreCap = 0.0}),
      S{"/endpointScoreCap: 0.0 is not strictly positive; expected a number > 0 or \"none\""});
  EXPECT_EQ(errorsOf({.endpointScoreCap = kNaN}).size(), 1u);
  auto made = UtilizationDetector::create({.endpointScoreCap = 0.5});
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made.diagnostics().warnings().size(), 1u);
  EXPECT_TRUE(
      UtilizationDetector::create({.endpointScoreCap = UtilizationDetector::kUncapped}).ok());
}

// ---- utilization-detector: reference §4.2 filter vectors --------------------------------------

TEST(UtilizationDetectorTest, ReferenceFilterVectors) {
  auto d = utilization({.queueDepthThreshold = 5,
                        .kvCacheUtilThreshold = 0.8,
                        .metricsStalenessThreshold = milliseconds(100),
                        .headroom = 0.2});
  EXPECT_DOUBLE_EQ(d->queueLimit(), 6.0);
  EXPECT_NEAR(d->kvCacheLimit(), 0.96, 1e-12);
  using V = std::vector<std::size_t>;
  EXPECT_EQ(filterOf(*d, {metrics(1, 0.1), metrics(4, 0.7)}).kept, (V{0, 1}));
  EXPECT_EQ(filterOf(*d, {metrics(5, 0.8)}).kept, (V{0}));
  EXPECT_EQ(filterOf(*d, {metrics(5, 0.9)}).kept, (V{0}));
  EXPECT_EQ(filterOf(*d, {metrics(7, 0.1), metrics(1, 0.1)}).kept, (V{1}));
  EXPECT_EQ(filterOf(*d, {metrics(1, 0.97), metrics(1, 0.5)}).kept, (V{1}));
  for (const Filtered& f :
       {filterOf(*d, {metrics(1, 0.1, milliseconds(200)), metrics(1, 0.1, milliseconds(200))}),
        filterOf(*d, {metrics(10, 0.1), metrics(1, 0.99)})}) {
    EXPECT_EQ(f.kept, (V{0, 1}));
    EXPECT_TRUE(f.failOpen);
  }
  EXPECT_FALSE(filterOf(*d, {metrics(1, 0.1), metrics(4, 0.7)}).failOpen);
}

TEST(UtilizationDetectorTest, FilterLimitsAreStrict) {
  auto d = utilization({.queueDepthThreshold = 5, .kvCacheUtilThreshold = 0.5});
  using V = std::vector<std::size_t>;
  // Exactly at a limit is dropped (the other endpoint keeps the filter from failing open).
  EXPECT_EQ(filterOf(*d, {metrics(5, 0.1), metrics(0, 0)}).kept, (V{1}));
  EXPECT_EQ(filterOf(*d, {metrics(4.999, 0.4999), metrics(0, 0.5)}).kept, (V{0}));
}

TEST(UtilizationDetectorTest, FilterCapsTheKvLimitAtOne) {
  // 0.9 * (1 + 0.2) = 1.08 uncapped (the Go code); the seed README caps it at 1.0.
  auto d = utilization({.kvCacheUtilThreshold = 0.9, .headroom = 0.2});
  EXPECT_EQ(d->kvCacheLimit(), 1.0);
  using V = std::vector<std::size_t>;
  // A completely full KV cache is dropped, just below is kept.
  EXPECT_EQ(filterOf(*d, {metrics(0, 1.0), metrics(0, 0.999)}).kept, (V{1}));
}

TEST(UtilizationDetectorTest, FilterDropsStaleAndInvalidAndFailsOpen) {
  auto d = utilization({.metricsStalenessThreshold = milliseconds(100)});
  using V = std::vector<std::size_t>;
  EXPECT_EQ(filterOf(*d, {noMetrics(), metrics(kNaN, 0), metrics(0, -1), metrics(0, 0)}).kept,
            (V{3}));
  const Filtered open = filterOf(*d, {noMetrics(), metrics(kInf, 0)});
  EXPECT_EQ(open.kept, (V{0, 1}));
  EXPECT_TRUE(open.failOpen);
  // Empty list: nothing kept, not a fail-open.
  const Filtered empty = filterOf(*d, {});
  EXPECT_TRUE(empty.kept.empty());
  EXPECT_FALSE(empty.failOpen);
}

TEST(UtilizationDetectorTest, FilterWritesNoMoreThanTheBuffer) {
  auto d = utilization({});
  const std::vector<Endpoint> pool{metrics(0, 0), metrics(9, 0), metrics(0, 0), metrics(0, 0)};
  std::vector<std::size_t> out(2, 999);
  FilterResult r = d->filter(pool, kNow, out);
  EXPECT_EQ(r.kept, 2u);
  EXPECT_FALSE(r.failOpen);
  EXPECT_EQ(out, (std::vector<std::size_t>{0, 2}));
  // Fail-open into a short buffer writes the first indices.
  const std::vector<Endpoint> stale{noMetrics(), noMetrics(), noMetrics()};
  r = d->filter(stale, kNow, out);
  EXPECT_EQ(r.kept, 2u);
  EXPECT_TRUE(r.failOpen);
  EXPECT_EQ(out, (std::vector<std::size_t>{0, 1}));
  // An empty buffer: nothing written, but the filter still knows whether anything passed.
  r = d->filter(pool, kNow, {});
  EXPECT_EQ(r.kept, 0u);
  EXPECT_FALSE(r.failOpen);
}

// ---- utilization-detector: constructor-level validation ---------------------------------------

TEST(UtilizationDetectorTest, CreateRejectsInvalidOptions) {
  const auto errorsOf = [](UtilizationDetectorOptions options) {
    std::vector<std::string> out;
    auto made = UtilizationDetector::create(options);
    for (const auto& d : made.diagnostics().errors()) out.push_back(d.toString());
    EXPECT_EQ(made.ok(), out.empty());
    return out;
  };
  using S = std::vector<std::string>;
  EXPECT_EQ(errorsOf({.queueDepthThreshold = 0}),
            S{"/queueDepthThreshold: 0 is not strictly positive; expected an integer > 0"});
  EXPECT_EQ(errorsOf({.queueDepthThreshold = -3}),
            S{"/queueDepthThreshold: -3 is not strictly positive; expected an integer > 0"});
  EXPECT_EQ(errorsOf({.kvCacheUtilThreshold = 0.0}),
            S{"/kvCacheUtilThreshold: 0.0 is outside (0.0, 1.0]"});
  EXPECT_EQ(errorsOf({.kvCacheUtilThreshold = 1.5}),
            S{"/kvCacheUtilThreshold: 1.5 is outside (0.0, 1.0]"});
  EXPECT_EQ(errorsOf({.kvCacheUtilThreshold = kNaN}),
            S{"/kvCacheUtilThreshold: nan is outside (0.0, 1.0]"});
  EXPECT_EQ(errorsOf({.metricsStalenessThreshold = Duration::zero()}),
            S{"/metricsStalenessThreshold: \"0s\" is not strictly positive; expected a duration "
              "> 0 such as \"200ms\""});
  EXPECT_EQ(errorsOf({.metricsStalenessThreshold = -milliseconds(1500)}),
            S{"/metricsStalenessThreshold: \"-1.5s\" is not strictly positive; expected a "
              "duration > 0 such as \"200ms\""});
  EXPECT_EQ(errorsOf({.headroom = -0.5}),
            S{"/headroom: -0.5 is negative; expected a number >= 0.0"});
  EXPECT_EQ(errorsOf({.headroom = kInf}),
            S{"/headroom: inf is not finite; expected a number >= 0.0"});
  EXPECT_EQ(errorsOf({.headroom = kNaN}),
            S{"/headroom: nan is not finite; expected a number >= 0.0"});
  // Every problem at once.
  EXPECT_EQ(errorsOf({.queueDepthThreshold = 0, .kvCacheUtilThreshold = 2, .headroom = -1}).size(),
            3u);
  // headroom > 1 is accepted with a warning.
  auto wide = UtilizationDetector::create({.headroom = 2.0});
  ASSERT_TRUE(wide.ok());
  ASSERT_EQ(wide.diagnostics().warnings().size(), 1u);
  EXPECT_EQ(wide.diagnostics().warnings()[0].toString(),
            "/headroom: 2.0 is above 1.0: the filter lets endpoints exceed their thresholds by "
            "more than 100%");
}

TEST(UtilizationDetectorTest, DefaultsAndType) {
  auto d = utilization({});
  EXPECT_EQ(d->type(), "utilization-detector");
  EXPECT_EQ(d->name(), "utilization-detector");
  EXPECT_EQ(d->options().queueDepthThreshold, 5);
  EXPECT_EQ(d->options().kvCacheUtilThreshold, 0.8);
  EXPECT_EQ(d->options().metricsStalenessThreshold, milliseconds(200));
  EXPECT_EQ(d->options().headroom, 0.0);
  EXPECT_EQ(d->options().aggregation, Aggregation::kMean);
  EXPECT_EQ(d->options().stalenessPolicy, StalenessPolicy::kSaturated);
}

// ---- concurrency-detector: reference §4.3 --------------------------------------------------

Endpoint load(std::int64_t requests, std::int64_t tokens = 0, std::string name = "e") {
  Endpoint e;
  e.name = std::move(name);
  e.inFlightRequests = requests;
  e.inFlightTokens = tokens;
  return e;
}

std::unique_ptr<ConcurrencyDetector> concurrency(ConcurrencyDetectorOptions options) {
  auto made = ConcurrencyDetector::create(options);
  EXPECT_TRUE(made.ok()) << made.diagnostics().toString();
  return std::move(made).value();
}

TEST(ConcurrencyDetectorTest, ReferenceRequestsVectors) {
  auto d = concurrency({.maxConcurrency = 10});
  const std::vector<test_support::GoSaturationVector> vectors{
      {"none", {}, 1.0},
      {"a:0", {load(0)}, 0.0},
      {"a:5", {load(5)}, 0.5},
      {"a:10", {load(10)}, 1.0},
      {"a:10, b:0", {load(10), load(0)}, 0.5},
      {"a:15, b:5", {load(15), load(5)}, 1.0},
      {"a:15, b:15", {load(15), load(15)}, 1.5},
      {"unknown endpoint (no counts)", {Endpoint{}}, 0.0},
      {"two endpoints without counts", {Endpoint{}, Endpoint{}}, 0.0},
      {"loaded:10 + endpoint without counts", {load(10), Endpoint{}}, 0.5},
  };
  for (const auto& v : vectors) {
    EXPECT_DOUBLE_EQ(d->saturation(v.endpoints, kNow), v.expected) << v.label;
  }
  // The reference's [null] (no capacity at all) is not representable in a span of Endpoint; the
  // closest case, an empty list, fails closed and filters to nothing.
  EXPECT_EQ(filterOf(*d, {}).kept.size(), 0u);
  EXPECT_FALSE(filterOf(*d, {}).failOpen);
}

TEST(ConcurrencyDetectorTest, ReferenceConfigVectorWithHeadroom) {
  auto d = concurrency({.maxConcurrency = 50, .headroom = 0.2});
  EXPECT_DOUBLE_EQ(d->saturation({{load(49)}}, kNow), 0.98);
  EXPECT_DOUBLE_EQ(d->saturation({{load(50)}}, kNow), 1.0);
  EXPECT_EQ(d->requestLimit().value, 60);
  using V = std::vector<std::size_t>;
  EXPECT_EQ(filterOf(*d, {load(59)}).kept, (V{0}));
  const Filtered dropped = filterOf(*d, {load(60)});
  EXPECT_EQ(dropped.kept, V{});  // no fail-open
  EXPECT_FALSE(dropped.failOpen);
  EXPECT_EQ(filterOf(*d, {load(60), load(0)}).kept, (V{1}));
}

TEST(ConcurrencyDetectorTest, FilterLimitTruncatesTowardZero) {
  // 7 * 1.3 = 9.1 -> 9: 8 kept, 9 dropped.
  auto d = concurrency({.maxConcurrency = 7, .headroom = 0.3});
  EXPECT_EQ(d->requestLimit().value, 9);
  EXPECT_EQ(filterOf(*d, {load(8), load(9)}).kept, (std::vector<std::size_t>{0}));
  // A limit beyond int64 admits every count instead of overflowing.
  auto huge =
      concurrency({.maxConcurrency = std::numeric_limits<std::int64_t>::max(), .headroom = 1.0});
  EXPECT_TRUE(huge->requestLimit().unbounded);
  EXPECT_EQ(filterOf(*huge, {load(std::numeric_limits<std::int64_t>::max())}).kept.size(), 1u);
}

TEST(ConcurrencyDetectorTest, ReferenceTokensVectors) {
  auto d = concurrency({.mode = ConcurrencyMode::kTokens, .maxTokenConcurrency = 100});
  EXPECT_DOUBLE_EQ(d->saturation({{load(0, 0)}}, kNow), 0.0);
  EXPECT_DOUBLE_EQ(d->saturation({{load(1, 3)}}, kNow), 0.03);  // 1 input token + 2 estimated
  EXPECT_DOUBLE_EQ(d->saturation({{load(5, 50)}}, kNow), 0.5);
  EXPECT_DOUBLE_EQ(d->saturation({{load(10, 100)}}, kNow), 1.0);
  EXPECT_DOUBLE_EQ(d->saturation({{load(1, 50, "a"), load(0, 0, "b")}}, kNow), 0.25);
  auto f =
      concurrency({.mode = ConcurrencyMode::kTokens, .maxTokenConcurrency = 100, .headroom = 0.2});
  EXPECT_EQ(f->tokenLimit().value, 120);
  EXPECT_EQ(filterOf(*f, {load(1, 110)}).kept.size(), 1u);
  EXPECT_EQ(filterOf(*f, {load(1, 120)}).kept.size(), 0u);
}

TEST(ConcurrencyDetectorTest, ReferenceHybridVectors) {
  auto d = concurrency(
      {.mode = ConcurrencyMode::kHybrid, .maxConcurrency = 10, .maxTokenConcurrency = 100});
  EXPECT_DOUBLE_EQ(d->saturation({{load(2, 80)}}, kNow), 0.8);
  EXPECT_DOUBLE_EQ(d->saturation({{load(9, 10)}}, kNow), 0.9);
  EXPECT_DOUBLE_EQ(d->saturation({{load(10, 5)}}, kNow), 1.0);
  EXPECT_DOUBLE_EQ(d->saturation({{load(1, 100)}}, kNow), 1.0);
  EXPECT_DOUBLE_EQ(d->saturation({{load(10, 0), load(0, 100)}}, kNow), 1.0);
  EXPECT_DOUBLE_EQ(d->saturation({{load(10, 0), load(0, 0)}}, kNow), 0.5);
  EXPECT_EQ(filterOf(*d, {load(5, 50), load(10, 50), load(5, 100), load(20, 200)}).kept,
            (std::vector<std::size_t>{0}));
}

TEST(ConcurrencyDetectorTest, NegativeCountsCountAsFullAndAreFiltered) {
  auto d = concurrency({.maxConcurrency = 10, .headroom = 1.0});
  EXPECT_DOUBLE_EQ(d->saturation({{load(-5), load(0)}}, kNow), 0.5);
  EXPECT_EQ(filterOf(*d, {load(-5), load(3, -1), load(3)}).kept, (std::vector<std::size_t>{2}));
  auto h = concurrency(
      {.mode = ConcurrencyMode::kHybrid, .maxConcurrency = 10, .maxTokenConcurrency = 100});
  EXPECT_DOUBLE_EQ(h->saturation({{load(0, std::numeric_limits<std::int64_t>::min())}}, kNow), 1.0);
}

TEST(ConcurrencyDetectorTest, HugeCountsDoNotWrap) {
  auto d = concurrency({.maxConcurrency = 1});
  const auto big = std::numeric_limits<std::int64_t>::max();
  const double s = d->saturation({{load(big), load(big)}}, kNow);
  EXPECT_TRUE(std::isfinite(s));
  EXPECT_GT(s, 1e18);
}

TEST(ConcurrencyDetectorTest, CreateRejectsInvalidOptions) {
  const auto errorsOf = [](ConcurrencyDetectorOptions options) {
    std::vector<std::string> out;
    auto made = ConcurrencyDetector::create(options);
    for (const auto& d : made.diagnostics().errors()) out.push_back(d.toString());
    EXPECT_EQ(made.ok(), out.empty());
    return out;
  };
  using S = std::vector<std::string>;
  EXPECT_EQ(errorsOf({.maxConcurrency = 0}),
            S{"/maxConcurrency: 0 is not strictly positive; expected an integer > 0"});
  EXPECT_EQ(errorsOf({.maxTokenConcurrency = 0}),
            S{"/maxTokenConcurrency: 0 is not strictly positive; expected an integer > 0"});
  EXPECT_EQ(errorsOf({.headroom = -0.5}),
            S{"/headroom: -0.5 is negative; expected a number >= 0.0"});
  EXPECT_EQ(errorsOf({.maxConcurrency = -1, .maxTokenConcurrency = -1, .headroom = kNaN}).size(),
            3u);
  EXPECT_TRUE(ConcurrencyDetector::create({.headroom = 2.0}).ok());
  auto d = concurrency({});
  EXPECT_EQ(d->type(), "concurrency-detector");
  EXPECT_EQ(d->options().maxConcurrency, 100);
  EXPECT_EQ(d->options().maxTokenConcurrency, 1'000'000);
  EXPECT_EQ(d->options().mode, ConcurrencyMode::kRequests);
}

// ---- no allocation on the hot paths -----------------------------------------------------------

TEST(DetectorAllocationTest, SaturationAndFilterDoNotAllocate) {
  std::vector<std::unique_ptr<SaturationDetector>> detectors;
  detectors.push_back(utilization({}));
  detectors.push_back(utilization(
      {.aggregation = Aggregation::kWeighted, .stalenessPolicy = StalenessPolicy::kIgnore}));
  detectors.push_back(concurrency({}));
  detectors.push_back(concurrency({.mode = ConcurrencyMode::kHybrid, .headroom = 0.5}));
  std::vector<Endpoint> pool{metrics(1, 0.1, Duration::zero(), "a-rather-long-endpoint-name-0"),
                             metrics(9, 0.9), noMetrics(), metrics(kNaN, 0.1), load(120, 5000)};
  std::vector<std::size_t> out(pool.size());
  testing::AllocationCounter counter;
  double sink = 0.0;
  for (const auto& d : detectors) {
    sink += d->saturation(pool, kNow);
    sink += static_cast<double>(d->filter(pool, kNow, out).kept);
    sink += d->saturation({}, kNow);
  }
  EXPECT_EQ(counter.count(), 0u);
  EXPECT_GT(sink, 0.0);
}

}  // namespace
}  // namespace holdback
