// The SaturationDetector conformance suite, instantiated for both built-in detectors in every
// mode, aggregation and staleness policy.
#include "holdback/testing/saturation_detector_conformance.hpp"

#include "holdback/detector/detectors.hpp"

namespace holdback {
namespace {

using testing::DetectorFactory;
using testing::SaturationDetectorConformanceTest;

std::unique_ptr<SaturationDetector> utilization(UtilizationDetectorOptions options) {
  return std::move(UtilizationDetector::create(options)).value();
}
std::unique_ptr<SaturationDetector> concurrency(ConcurrencyDetectorOptions options) {
  return std::move(ConcurrencyDetector::create(options)).value();
}

const DetectorFactory kBuiltins[] = {
    {"UtilizationDefault", [] { return utilization({}); }},
    {"UtilizationReference",
     [] {
       return utilization({.queueDepthThreshold = 5,
                           .kvCacheUtilThreshold = 0.9,
                           .metricsStalenessThreshold = std::chrono::milliseconds(100),
                           .headroom = 0.2});
     }},
    {"UtilizationMax", [] { return utilization({.aggregation = Aggregation::kMax}); }},
    {"UtilizationWeightedIgnore",
     [] {
       return utilization({.queueDepthThreshold = 1,
                           .kvCacheUtilThreshold = std::numeric_limits<double>::denorm_min(),
                           .metricsStalenessThreshold = std::chrono::seconds(5),
                           .headroom = 1e300,
                           .aggregation = Aggregation::kWeighted,
                           .stalenessPolicy = StalenessPolicy::kIgnore});
     }},
    {"UtilizationHugeStaleness",
     [] {
       return utilization(
           {.metricsStalenessThreshold = Duration(std::numeric_limits<std::int64_t>::max())});
     }},
    {"ConcurrencyRequests", [] { return concurrency({.maxConcurrency = 10}); }},
    {"ConcurrencyTokens",
     [] {
       return concurrency(
           {.mode = ConcurrencyMode::kTokens, .maxTokenConcurrency = 100, .headroom = 0.2});
     }},
    {"ConcurrencyHybrid",
     [] {
       return concurrency(
           {.mode = ConcurrencyMode::kHybrid, .maxConcurrency = 1, .maxTokenConcurrency = 1});
     }},
    {"ConcurrencyHugeHeadroom",
     [] {
       return concurrency(
           {.maxConcurrency = std::numeric_limits<std::int64_t>::max(), .headroom = 1e300});
     }},
};

INSTANTIATE_TEST_SUITE_P(Builtins, SaturationDetectorConformanceTest,
                         ::testing::ValuesIn(kBuiltins), testing::DetectorFactoryName{});

}  // namespace
}  // namespace holdback
