// The SaturationDetector conformance suite, instantiated for both built-in detectors in every
// mode, aggregation and staleness policy.
#include "holdback/testing/saturation_detector_conformance.hpp"

#include "holdback/detector/detectors.hpp"

namespace holdback {
namespace {

using testing::DetectorFactory;
using testing::SaturationDetectorConformanceTest;

std::unique_ptr<SaturationDetector> utilizationDetector(UtilizationDetectorOptions options) {
  return std::move(UtilizationDetector::create(options)).value();
}
std::unique_ptr<SaturationDetector> concurrencyDetector(ConcurrencyDetectorOptions options) {
  return std::move(ConcurrencyDetector::create(options)).value();
}

const DetectorFactory kDetectorBuiltins[] = {
    {"UtilizationDefault", [] { return utilizationDetector({}); }},
    {"UtilizationReference",
     [] {
       return utilizationDetector({.queueDepthThreshold = 5,
                                   .kvCacheUtilThreshold = 0.9,
                                   .metricsStalenessThreshold = std::chrono::milliseconds(100),
                                   .headroom = 0.2});
     }},
    {"UtilizationMax", [] { return utilizationDetector({.aggregation = Aggregation::kMax}); }},
    {"UtilizationWeightedIgnore",
     [] {
       return utilizationDetector(
           {.queueDepthThreshold = 1,
            .kvCacheUtilThreshold = std::numeric_limits<double>::denorm_min(),
            .metricsStalenessThreshold = std::chrono::seconds(5),
            .headroom = 1e300,
            .aggregation = Aggregation::kWeighted,
            .stalenessPolicy = StalenessPolicy::kIgnore});
     }},
    {"UtilizationHugeStaleness",
     [] {
       return utilizationDetector(
           {.metricsStalenessThreshold = Duration(std::numeric_limits<std::int64_t>::max())});
     }},
    {"ConcurrencyRequests", [] { return concurrencyDetector({.maxConcurrency = 10}); }},
    {"ConcurrencyTokens",
     [] {
       return concurrencyDetector(
           {.mode = ConcurrencyMode::kTokens, .maxTokenConcurrency = 100, .headroom = 0.2});
     }},
    {"ConcurrencyHybrid",
     [] {
       return concurrencyDetector(
           {.mode = ConcurrencyMode::kHybrid, .maxConcurrency = 1, .maxTokenConcurrency = 1});
     }},
    {"ConcurrencyHugeHeadroom",
     [] {
       return concurrencyDetector(
           {.maxConcurrency = std::numeric_limits<std::int64_t>::max(), .headroom = 1e300});
     }},
};

INSTANTIATE_TEST_SUITE_P(Builtins, SaturationDetectorConformanceTest,
                         ::testing::ValuesIn(kDetectorBuiltins), testing::DetectorFactoryName{});

}  // namespace
}  // namespace holdback
